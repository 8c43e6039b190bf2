/*
 * kb_loop: the event loop: level-triggered epoll over file descriptors,
 * a monotonic timer heap, and a before-sleep hook.
 *
 * Job: call back the owner of a descriptor when it is readable or writable,
 * and the owner of a timer when its deadline passes. Everything the broker
 * does happens inside these callbacks, on the loop's thread.
 *
 * Invariants:
 *   1. Each fd has at most one registration; its callback is never called
 *      after kb_loop_del_fd() returned, even within the same event batch.
 *   2. The heap holds exactly the armed timers; a timer's heap_index is its
 *      slot while armed and KB_TIMER_IDLE otherwise.
 *   3. kb_loop_now_ms() is CLOCK_MONOTONIC in ms (or the clock a test
 *      set), refreshed once per wakeup.
 *
 * Ownership: the loop owns its epoll descriptor and tables; callers own the
 * fds they register and the kb_timer structs they arm (which must stay
 * valid while armed).
 *
 * Threading: every function runs on the loop's thread only.
 *
 * Errors: kb_loop_add_fd / kb_loop_mod_fd return KP_ERR__IO (errno in
 * ctx) or KP_ERR__NOMEM.
 */
#ifndef KB_LOOP_H
#define KB_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

typedef struct kb_loop kb_loop;

enum {
    KB_EV_READ = 1u << 0,
    KB_EV_WRITE = 1u << 1,
};

typedef void kb_fd_cb(kb_loop *loop, int fd, unsigned events, void *arg);
typedef void kb_timer_cb(kb_loop *loop, void *arg);
typedef void kb_hook_cb(kb_loop *loop, void *arg);

#define KB_TIMER_IDLE SIZE_MAX

/* A timer embedded in its owner's struct (nginx style). */
typedef struct kb_timer {
    int64_t deadline_ms;
    size_t heap_index;
    kb_timer_cb *cb;
    void *arg;
} kb_timer;

kb_loop *kb_loop_new(void);
void kb_loop_free(kb_loop *loop);

kp_err kb_loop_add_fd(kb_loop *loop, int fd, unsigned events, kb_fd_cb *cb, void *arg);
kp_err kb_loop_mod_fd(kb_loop *loop, int fd, unsigned events);
void kb_loop_del_fd(kb_loop *loop, int fd);

void kb_timer_init(kb_timer *t, kb_timer_cb *cb, void *arg);
/* Arms (or re-arms) t to fire after ms milliseconds. */
kp_err kb_timer_arm(kb_loop *loop, kb_timer *t, int64_t ms);
void kb_timer_disarm(kb_loop *loop, kb_timer *t);
bool kb_timer_armed(const kb_timer *t);

/* Called before each wait; runs after every event batch. */
void kb_loop_set_before_sleep(kb_loop *loop, kb_hook_cb *cb, void *arg);

int64_t kb_loop_now_ms(const kb_loop *loop);
/* Tests: the loop's clock becomes clock(arg), read once per wakeup as
 * CLOCK_MONOTONIC is (a fake clock the test advances). */
void kb_loop_set_clock(kb_loop *loop, int64_t (*clock)(void *arg), void *arg);
/* Tests: one iteration of kb_loop_run (the before-sleep hook, a wait of at
 * most wait_ms for events, their callbacks, the timers due). */
kp_err kb_loop_step(kb_loop *loop, int wait_ms);
/* Runs until kb_loop_stop(); returns KP_ERR__IO if epoll_wait fails. */
kp_err kb_loop_run(kb_loop *loop);
void kb_loop_stop(kb_loop *loop);

#endif
