/*
 * kb_longpoll: requests parked until an append reaches one of the
 * partitions they wait on (fetch long polls; later, replica fetches).
 *
 * Job: keep, per partition, the list of parked waiters, so an append wakes
 * only the waiters of its own partition: the cost of an append is the
 * number of requests waiting on that partition, not on the broker.
 *
 * Invariants:
 *   1. A parked waiter has one watch in the list of each partition it
 *      named (a partition named twice has two; both are harmless); an
 *      unparked waiter has none.
 *   2. While an append walks a partition's list, a waiter unparked by a
 *      wake (its own or another's) only marks its watches there dead; the
 *      walk skips dead watches and frees them, and the list when empty,
 *      when it ends. So a wake may unpark, finish or free any waiter.
 *   3. Lists are found by (topic id, partition), never by pointer, so a
 *      deleted topic leaves no dangling reference: its waiters stay parked
 *      until their own timeout.
 *
 * Ownership: the registry owns its lists and watches; the caller owns each
 * kb_poll_waiter, which must be unparked before it is freed.
 *
 * Threading: loop thread only.
 *
 * Errors: kb_longpoll_park returns KP_ERR__NOMEM (the waiter is then not
 * parked anywhere).
 */
#ifndef KB_LONGPOLL_H
#define KB_LONGPOLL_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_topics.h"

typedef struct kb_poll_waiter kb_poll_waiter;
/* An append reached one of w's partitions; w decides whether to finish. */
typedef void kb_poll_wake_fn(kb_poll_waiter *w);

struct kb_poll_waiter {
    kb_poll_wake_fn *wake;
    void *arg;
    struct kb_poll_watch **watches; /* owned by the registry's lists */
    int32_t nwatches;
};

/* Creates the broker's registry (b->longpoll) and hooks it to the
 * partition logs' appends. */
kp_err kb_longpoll_start(kb_broker *b);
void kb_longpoll_stop(kb_broker *b);

kb_longpoll *kb_longpoll_new(void);
/* Frees the lists; every waiter must have been unparked. */
void kb_longpoll_free(kb_longpoll *lp);

/* Parks w on each (topics[i], partitions[i]); w->wake and w->arg set. */
kp_err kb_longpoll_park(kb_longpoll *lp, kb_poll_waiter *w, kb_topic *const *topics,
                        const int32_t *partitions, int32_t n);
/* Takes w off every list; a waiter not parked is left as it is. */
void kb_longpoll_unpark(kb_longpoll *lp, kb_poll_waiter *w);
/* An append reached (t, partition): wakes the waiters parked there. */
void kb_longpoll_appended(kb_longpoll *lp, const kb_topic *t, int32_t partition);
/* Waiters parked on (t, partition), for tests and metrics. */
int32_t kb_longpoll_waiting(const kb_longpoll *lp, const kb_topic *t, int32_t partition);

#endif
