#include "kb_work.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct work_item {
    struct work_item *next;
    kb_work_fn *fn;
    kb_work_fn *done;
    void *arg;
} work_item;

typedef struct work_queue {
    work_item *head;
    work_item *tail;
} work_queue;

struct kb_work {
    pthread_mutex_t lock;
    pthread_cond_t ready;
    work_queue todo;     /* guarded by lock */
    work_queue finished; /* guarded by lock */
    bool stopping;       /* guarded by lock */
    int eventfd;
    int nthreads;
    pthread_t threads[];
};

static void queue_push(work_queue *q, work_item *it)
{
    it->next = NULL;
    if (q->tail != NULL)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
}

static work_item *queue_take_all(work_queue *q)
{
    work_item *all = q->head;
    q->head = q->tail = NULL;
    return all;
}

static void *worker_main(void *arg)
{
    kb_work *w = arg;
    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->todo.head == NULL && !w->stopping)
            pthread_cond_wait(&w->ready, &w->lock);
        work_item *it = w->todo.head;
        if (it == NULL)
            break; /* stopping and nothing left */
        w->todo.head = it->next;
        if (w->todo.head == NULL)
            w->todo.tail = NULL;
        pthread_mutex_unlock(&w->lock);
        it->fn(it->arg);
        pthread_mutex_lock(&w->lock);
        queue_push(&w->finished, it);
        uint64_t one = 1;
        if (write(w->eventfd, &one, sizeof(one)) < 0) {
            /* the counter cannot overflow in practice; the loop drains anyway */
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void drain_finished(kb_work *w)
{
    pthread_mutex_lock(&w->lock);
    work_item *it = queue_take_all(&w->finished);
    pthread_mutex_unlock(&w->lock);
    while (it != NULL) {
        work_item *next = it->next;
        it->done(it->arg);
        free(it);
        it = next;
    }
}

static void on_work_event(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)loop;
    (void)events;
    uint64_t n;
    if (read(fd, &n, sizeof(n)) < 0) {
        /* EAGAIN: a previous read took the count; drain regardless */
    }
    drain_finished(arg);
}

kp_err kb_work_new(kb_loop *loop, int threads, kb_work **out)
{
    *out = NULL;
    kb_work *w = calloc(1, sizeof(*w) + (size_t)threads * sizeof(pthread_t));
    if (w == NULL)
        return KP_ERR__NOMEM;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->ready, NULL);
    w->eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    *out = w;
    if (w->eventfd < 0 ||
        kb_loop_add_fd(loop, w->eventfd, KB_EV_READ, on_work_event, w) != KP_ERR_NONE)
        return KP_ERR__IO;
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0)
            return KP_ERR__IO;
        w->nthreads++;
    }
    return KP_ERR_NONE;
}

void kb_work_free(kb_work *w, kb_loop *loop)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    pthread_cond_broadcast(&w->ready);
    pthread_mutex_unlock(&w->lock);
    for (int i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    drain_finished(w);
    if (w->eventfd >= 0) {
        kb_loop_del_fd(loop, w->eventfd);
        close(w->eventfd);
    }
    pthread_cond_destroy(&w->ready);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

kp_err kb_work_post(kb_work *w, kb_work_fn *fn, kb_work_fn *done, void *arg)
{
    work_item *it = malloc(sizeof(*it));
    if (it == NULL)
        return KP_ERR__NOMEM;
    *it = (work_item){NULL, fn, done, arg};
    pthread_mutex_lock(&w->lock);
    bool stopping = w->stopping;
    if (!stopping) {
        queue_push(&w->todo, it);
        pthread_cond_signal(&w->ready);
    }
    pthread_mutex_unlock(&w->lock);
    if (stopping) {
        free(it); /* a done() run by kb_work_stop submitting more: refused */
        return KP_ERR__CLOSED;
    }
    return KP_ERR_NONE;
}

kp_err kb_work_start(kb_broker *b, int threads)
{
    return kb_work_new(b->loop, threads, &b->work);
}

void kb_work_stop(kb_broker *b)
{
    kb_work_free(b->work, b->loop);
    b->work = NULL;
}

kp_err kb_work_submit(kb_broker *b, kb_work_fn *fn, kb_work_fn *done, void *arg)
{
    return kb_work_post(b->work, fn, done, arg);
}
