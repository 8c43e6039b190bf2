#include "kb_loop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define KB_LOOP_BATCH 256

typedef struct fd_slot {
    kb_fd_cb *cb;
    void *arg;
    unsigned events;
    bool used;
} fd_slot;

struct kb_loop {
    int epfd;
    fd_slot *fds;
    int nfds;
    kb_timer **heap;
    size_t heap_len;
    size_t heap_cap;
    kb_hook_cb *before_sleep;
    void *before_sleep_arg;
    int64_t now_ms;
    int64_t (*clock)(void *arg); /* NULL: CLOCK_MONOTONIC */
    void *clock_arg;
    bool stop;
};

static int64_t monotonic_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t loop_clock(const kb_loop *loop)
{
    return loop->clock != NULL ? loop->clock(loop->clock_arg) : monotonic_ms();
}

void kb_loop_set_clock(kb_loop *loop, int64_t (*clock)(void *arg), void *arg)
{
    loop->clock = clock;
    loop->clock_arg = arg;
    loop->now_ms = loop_clock(loop);
}

kb_loop *kb_loop_new(void)
{
    kb_loop *loop = calloc(1, sizeof(*loop));
    if (loop == NULL)
        return NULL;
    loop->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (loop->epfd < 0) {
        free(loop);
        return NULL;
    }
    loop->now_ms = monotonic_ms();
    return loop;
}

void kb_loop_free(kb_loop *loop)
{
    if (loop == NULL)
        return;
    close(loop->epfd);
    free(loop->fds);
    free(loop->heap);
    free(loop);
}

static uint32_t to_epoll(unsigned events)
{
    return ((events & KB_EV_READ) ? EPOLLIN : 0u) | ((events & KB_EV_WRITE) ? EPOLLOUT : 0u);
}

static kp_err ensure_fd_slot(kb_loop *loop, int fd)
{
    if (fd < loop->nfds)
        return KP_ERR_NONE;
    int n = loop->nfds ? loop->nfds : 64;
    while (n <= fd)
        n *= 2;
    fd_slot *s = realloc(loop->fds, (size_t)n * sizeof(*s));
    if (s == NULL)
        return KP_ERR__NOMEM;
    memset(s + loop->nfds, 0, (size_t)(n - loop->nfds) * sizeof(*s));
    loop->fds = s;
    loop->nfds = n;
    return KP_ERR_NONE;
}

kp_err kb_loop_add_fd(kb_loop *loop, int fd, unsigned events, kb_fd_cb *cb, void *arg)
{
    if (fd < 0 || ensure_fd_slot(loop, fd) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    struct epoll_event ev = {.events = to_epoll(events), .data.fd = fd};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
        return KP_ERR__IO;
    loop->fds[fd] = (fd_slot){cb, arg, events, true};
    return KP_ERR_NONE;
}

kp_err kb_loop_mod_fd(kb_loop *loop, int fd, unsigned events)
{
    if (fd < 0 || fd >= loop->nfds || !loop->fds[fd].used)
        return KP_ERR__INVAL;
    if (loop->fds[fd].events == events)
        return KP_ERR_NONE;
    struct epoll_event ev = {.events = to_epoll(events), .data.fd = fd};
    if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, fd, &ev) != 0)
        return KP_ERR__IO;
    loop->fds[fd].events = events;
    return KP_ERR_NONE;
}

void kb_loop_del_fd(kb_loop *loop, int fd)
{
    if (fd < 0 || fd >= loop->nfds || !loop->fds[fd].used)
        return;
    (void)epoll_ctl(loop->epfd, EPOLL_CTL_DEL, fd, NULL);
    memset(&loop->fds[fd], 0, sizeof(loop->fds[fd]));
}

/* ---- timer heap --------------------------------------------------------- */

static void heap_swap(kb_loop *loop, size_t a, size_t b)
{
    kb_timer *t = loop->heap[a];
    loop->heap[a] = loop->heap[b];
    loop->heap[b] = t;
    loop->heap[a]->heap_index = a;
    loop->heap[b]->heap_index = b;
}

static void heap_up(kb_loop *loop, size_t i)
{
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (loop->heap[parent]->deadline_ms <= loop->heap[i]->deadline_ms)
            break;
        heap_swap(loop, i, parent);
        i = parent;
    }
}

static void heap_down(kb_loop *loop, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < loop->heap_len && loop->heap[l]->deadline_ms < loop->heap[m]->deadline_ms)
            m = l;
        if (r < loop->heap_len && loop->heap[r]->deadline_ms < loop->heap[m]->deadline_ms)
            m = r;
        if (m == i)
            return;
        heap_swap(loop, i, m);
        i = m;
    }
}

void kb_timer_init(kb_timer *t, kb_timer_cb *cb, void *arg)
{
    t->deadline_ms = 0;
    t->heap_index = KB_TIMER_IDLE;
    t->cb = cb;
    t->arg = arg;
}

bool kb_timer_armed(const kb_timer *t)
{
    return t->heap_index != KB_TIMER_IDLE;
}

void kb_timer_disarm(kb_loop *loop, kb_timer *t)
{
    size_t i = t->heap_index;
    if (i == KB_TIMER_IDLE)
        return;
    size_t last = --loop->heap_len;
    if (i != last) {
        loop->heap[i] = loop->heap[last];
        loop->heap[i]->heap_index = i;
        heap_down(loop, i);
        heap_up(loop, i);
    }
    t->heap_index = KB_TIMER_IDLE;
}

kp_err kb_timer_arm(kb_loop *loop, kb_timer *t, int64_t ms)
{
    kb_timer_disarm(loop, t);
    if (loop->heap_len == loop->heap_cap) {
        size_t cap = loop->heap_cap ? loop->heap_cap * 2 : 64;
        kb_timer **h = realloc(loop->heap, cap * sizeof(*h));
        if (h == NULL)
            return KP_ERR__NOMEM;
        loop->heap = h;
        loop->heap_cap = cap;
    }
    t->deadline_ms = loop->now_ms + (ms < 0 ? 0 : ms);
    t->heap_index = loop->heap_len;
    loop->heap[loop->heap_len++] = t;
    heap_up(loop, t->heap_index);
    return KP_ERR_NONE;
}

static void run_due_timers(kb_loop *loop)
{
    while (loop->heap_len > 0 && loop->heap[0]->deadline_ms <= loop->now_ms) {
        kb_timer *t = loop->heap[0];
        kb_timer_disarm(loop, t);
        t->cb(loop, t->arg);
    }
}

static int next_timeout_ms(const kb_loop *loop)
{
    if (loop->heap_len == 0)
        return 1000;
    int64_t wait = loop->heap[0]->deadline_ms - loop->now_ms;
    if (wait < 0)
        return 0;
    return wait > 1000 ? 1000 : (int)wait;
}

/* ---- running ------------------------------------------------------------ */

void kb_loop_set_before_sleep(kb_loop *loop, kb_hook_cb *cb, void *arg)
{
    loop->before_sleep = cb;
    loop->before_sleep_arg = arg;
}

int64_t kb_loop_now_ms(const kb_loop *loop)
{
    return loop->now_ms;
}

void kb_loop_stop(kb_loop *loop)
{
    loop->stop = true;
}

static void dispatch_events(kb_loop *loop, const struct epoll_event *evs, int n)
{
    for (int i = 0; i < n; i++) {
        int fd = evs[i].data.fd;
        /* A callback earlier in this batch may have removed this fd. */
        if (fd >= loop->nfds || !loop->fds[fd].used)
            continue;
        unsigned events = 0;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            events |= KB_EV_READ;
        if (evs[i].events & (EPOLLOUT | EPOLLHUP | EPOLLERR))
            events |= KB_EV_WRITE;
        events &= loop->fds[fd].events | ((evs[i].events & (EPOLLHUP | EPOLLERR)) ? KB_EV_READ : 0);
        if (events != 0)
            loop->fds[fd].cb(loop, fd, events, loop->fds[fd].arg);
    }
}

/* One wait of at most wait_ms (-1: until the next timer), its events,
 * then the timers due. */
static kp_err loop_once(kb_loop *loop, int wait_ms)
{
    struct epoll_event evs[KB_LOOP_BATCH];
    int n = epoll_wait(loop->epfd, evs, KB_LOOP_BATCH, wait_ms < 0 ? next_timeout_ms(loop) : wait_ms);
    if (n < 0 && errno != EINTR)
        return KP_ERR__IO;
    loop->now_ms = loop_clock(loop);
    if (n > 0)
        dispatch_events(loop, evs, n);
    run_due_timers(loop);
    return KP_ERR_NONE;
}

kp_err kb_loop_step(kb_loop *loop, int wait_ms)
{
    if (loop->before_sleep != NULL)
        loop->before_sleep(loop, loop->before_sleep_arg);
    return loop_once(loop, wait_ms);
}

kp_err kb_loop_run(kb_loop *loop)
{
    loop->stop = false;
    while (!loop->stop) {
        if (loop->before_sleep != NULL)
            loop->before_sleep(loop, loop->before_sleep_arg);
        if (loop->stop)
            break;
        kp_err e = loop_once(loop, -1);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}
