#include "ks_flush.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

typedef struct flush_job {
    struct flush_job *next;
    ks_log *log;
    uint64_t cookie;
    ks_log_flush_target t;
    ks_flush_task_fn *task; /* a task job (no segments), else NULL */
    void *task_arg;
    kp_err err;
    kp_errctx errctx;
} flush_job;

typedef struct job_list {
    flush_job *head;
    flush_job *tail;
} job_list;

struct ks_flush {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job_list in;   /* submitted, guarded by mu */
    job_list done; /* synced, guarded by mu */
    bool stop;     /* guarded by mu */
    atomic_uint_fast64_t rounds;
    atomic_uint_fast64_t syncs;
    int efd;
};

/* One segment of a round: synced once, its result shared. */
typedef struct round_seg {
    ks_segment *seg;
    bool with_indexes;
    kp_err err;
    kp_errctx errctx;
} round_seg;

static void list_push(job_list *l, flush_job *j)
{
    j->next = NULL;
    if (l->tail != NULL)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
}

static void list_append(job_list *l, job_list *more)
{
    if (more->head == NULL)
        return;
    if (l->tail != NULL)
        l->tail->next = more->head;
    else
        l->head = more->head;
    l->tail = more->tail;
}

static int cmp_seg(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const round_seg *)a)->seg;
    uintptr_t y = (uintptr_t)((const round_seg *)b)->seg;
    return (x > y) - (x < y);
}

/* Gathers the round's segments, sorted and deduplicated. */
static round_seg *collect(flush_job *jobs, size_t *count)
{
    size_t n = 0;
    for (flush_job *j = jobs; j != NULL; j = j->next)
        n += (size_t)j->t.n;
    round_seg *v = calloc(n > 0 ? n : 1, sizeof(*v));
    if (v == NULL)
        return NULL;
    size_t k = 0;
    for (flush_job *j = jobs; j != NULL; j = j->next) {
        for (int32_t i = 0; i < j->t.n; i++)
            v[k++] = (round_seg){.seg = j->t.segs[i], .with_indexes = j->t.sealed[i]};
    }
    qsort(v, n, sizeof(*v), cmp_seg);
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        if (out > 0 && v[out - 1].seg == v[i].seg)
            v[out - 1].with_indexes = v[out - 1].with_indexes || v[i].with_indexes;
        else
            v[out++] = v[i];
    }
    *count = out;
    return v;
}

/* The first failure among a job's segments, or its directory fsync. */
static void job_result(flush_job *j, round_seg *v, size_t n)
{
    j->err = KP_ERR_NONE;
    for (int32_t i = 0; i < j->t.n && j->err == KP_ERR_NONE; i++) {
        round_seg key = {.seg = j->t.segs[i]};
        const round_seg *r = bsearch(&key, v, n, sizeof(*v), cmp_seg);
        if (r != NULL && r->err != KP_ERR_NONE) {
            j->err = r->err;
            j->errctx = r->errctx;
        }
    }
    if (j->err == KP_ERR_NONE && j->t.dir != NULL)
        j->err = ks_io_fsync_dir(&j->t.io, j->t.dir, &j->errctx);
}

static void run_round(ks_flush *f, flush_job *jobs)
{
    size_t n = 0;
    round_seg *v = collect(jobs, &n);
    for (size_t i = 0; v != NULL && i < n; i++) {
        v[i].err = ks_segment_sync(v[i].seg, v[i].with_indexes, &v[i].errctx);
        atomic_fetch_add(&f->syncs, 1);
    }
    for (flush_job *j = jobs; j != NULL; j = j->next) {
        if (j->task != NULL)
            j->task(j->task_arg);
        else if (v != NULL)
            job_result(j, v, n);
        else
            j->err = KP_ERRCTX(&j->errctx, KP_ERR__NOMEM, 0, "flush round");
    }
    free(v);
    atomic_fetch_add(&f->rounds, 1);
}

static void signal_loop(ks_flush *f)
{
    uint64_t one = 1;
    ssize_t rc;
    do {
        rc = write(f->efd, &one, sizeof(one));
    } while (rc < 0 && errno == EINTR);
}

static void *flush_thread(void *arg)
{
    ks_flush *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->in.head == NULL && !f->stop)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->in.head == NULL)
            break;
        job_list batch = f->in;
        f->in.head = f->in.tail = NULL;
        pthread_mutex_unlock(&f->mu);
        run_round(f, batch.head);
        pthread_mutex_lock(&f->mu);
        list_append(&f->done, &batch);
        signal_loop(f);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

kp_err ks_flush_new(ks_flush **out, kp_errctx *ctx)
{
    ks_flush *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "flusher");
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) {
        kp_err err = KP_ERRCTX(ctx, KP_ERR__IO, errno, "eventfd: %s", strerror(errno));
        free(f);
        return err;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    int rc = pthread_create(&f->thread, NULL, flush_thread, f);
    if (rc != 0) {
        close(f->efd);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->cv);
        free(f);
        return KP_ERRCTX(ctx, KP_ERR__IO, rc, "pthread_create: %s", strerror(rc));
    }
    *out = f;
    return KP_ERR_NONE;
}

int ks_flush_eventfd(const ks_flush *f)
{
    return f->efd;
}

/* Counts j as pending on its log and hands it to the thread. */
static void enqueue(ks_flush *f, flush_job *j)
{
    ks_log_flush_pending_add(j->log, 1);
    pthread_mutex_lock(&f->mu);
    list_push(&f->in, j);
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

kp_err ks_flush_submit(ks_flush *f, ks_log *log, uint64_t cookie, kp_errctx *ctx)
{
    flush_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "flush job");
    kp_err err = ks_log_flush_prepare(log, &j->t, ctx);
    if (err != KP_ERR_NONE) {
        free(j);
        return err;
    }
    j->log = log;
    j->cookie = cookie;
    enqueue(f, j);
    return KP_ERR_NONE;
}

kp_err ks_flush_submit_task(ks_flush *f, ks_log *log, ks_flush_task_fn *fn, void *arg,
                            kp_errctx *ctx)
{
    flush_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "flush task");
    j->log = log;
    j->task = fn;
    j->task_arg = arg;
    enqueue(f, j);
    return KP_ERR_NONE;
}

static void complete(flush_job *j, int64_t now_ms, ks_flush_done *out)
{
    if (j->task == NULL)
        ks_log_flush_complete(j->log, &j->t, j->err, now_ms);
    ks_log_flush_pending_add(j->log, -1);
    if (out != NULL) {
        out->cookie = j->cookie;
        out->log = j->log;
        out->offset = j->t.offset;
        out->err = j->err;
        out->errctx = j->errctx;
    }
    ks_log_flush_target_fini(&j->t);
    free(j);
}

size_t ks_flush_drain(ks_flush *f, int64_t now_ms, ks_flush_done *out, size_t max)
{
    uint64_t count;
    (void)!read(f->efd, &count, sizeof(count));
    pthread_mutex_lock(&f->mu);
    size_t n = 0;
    flush_job *taken = f->done.head;
    flush_job *last = NULL;
    for (flush_job *j = taken; j != NULL && n < max; j = j->next, n++)
        last = j;
    if (last != NULL) {
        f->done.head = last->next;
        if (f->done.head == NULL)
            f->done.tail = NULL;
        last->next = NULL;
    }
    bool more = f->done.head != NULL;
    pthread_mutex_unlock(&f->mu);
    for (size_t i = 0; i < n; i++) {
        flush_job *next = taken->next;
        complete(taken, now_ms, out != NULL ? &out[i] : NULL);
        taken = next;
    }
    if (more)
        signal_loop(f);
    return n;
}

void ks_flush_free(ks_flush *f, int64_t now_ms)
{
    if (f == NULL)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_signal(&f->cv);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    while (ks_flush_drain(f, now_ms, NULL, SIZE_MAX) > 0)
        ;
    close(f->efd);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

void ks_flush_stats(ks_flush *f, uint64_t *rounds, uint64_t *syncs)
{
    *rounds = atomic_load(&f->rounds);
    *syncs = atomic_load(&f->syncs);
}

bool ks_flush_policy_due(const ks_log *log, int64_t now_ms)
{
    const ks_log_config *cfg = ks_log_config_of(log);
    int64_t unflushed = ks_log_unflushed_messages(log);
    if (unflushed <= 0)
        return false;
    return unflushed >= cfg->flush_messages || now_ms >= ks_flush_policy_deadline(log);
}

int64_t ks_flush_policy_deadline(const ks_log *log)
{
    const ks_log_config *cfg = ks_log_config_of(log);
    int64_t last = ks_log_last_flush_ms(log);
    if (cfg->flush_ms == INT64_MAX || last > INT64_MAX - cfg->flush_ms)
        return INT64_MAX;
    return last + cfg->flush_ms;
}
