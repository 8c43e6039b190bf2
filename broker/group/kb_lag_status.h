/*
 * kb_lag_status: a consumer's verdict per partition over a sliding window of
 * its offset commits, by the rules Burrow evaluates.
 *
 * Job: keep the last `runnel.lag.window.commits` commits of one (group,
 * topic, partition): when, which offset, and the lag in records at that
 * moment; and judge the partition from them and the lag now:
 *
 *   order  rule                                                   status
 *   -----  -----------------------------------------------------  -------
 *   1      lag now is 0 (or less): the consumer is caught up       OK
 *   2      no commit for longer than max(span of the window,       STOPPED
 *          min_stop_ms), with lag now > 0
 *   3      the window is not yet full                              OK
 *   4      some commit in the window saw lag 0                     OK
 *   5      the committed offset did not move over the window       STALL
 *   6      the offset moved but the lag never fell from one        WARNING
 *          commit to the next, and grew over the window
 *   7      otherwise                                               OK
 *
 * A group's verdict folds its partitions' as Burrow does: ERROR when one is
 * STOPPED or STALL, else WARNING when one is WARNING, else OK.
 *
 * Invariants:
 *   1. 0 <= n <= size <= KB_LAG_WINDOW_MAX; the window's entries are in
 *      commit order, oldest first.
 *   2. Committed offsets in the window never decrease: a commit below the
 *      newest one (an offset reset) clears the window first.
 *   3. kb_lag_evaluate is pure: the same window, clock and lag give the same
 *      status (tests drive it on a fake clock).
 *
 * Ownership: the window is embedded by its owner (_init/_fini); it owns its
 * entry array.
 * Threading: none; the owner's thread.
 * Errors: KP_ERR__NOMEM from kb_lag_window_init.
 */
#ifndef KB_LAG_STATUS_H
#define KB_LAG_STATUS_H

#include <stdint.h>

#include "kp_types.h"

#define KB_LAG_WINDOW_MAX 100

typedef enum kb_lag_status {
    KB_LAG_OK = 0,
    KB_LAG_WARNING,
    KB_LAG_STALL,
    KB_LAG_STOPPED,
} kb_lag_status;

typedef enum kb_lag_group_status {
    KB_LAG_GROUP_OK = 0,
    KB_LAG_GROUP_WARNING,
    KB_LAG_GROUP_ERROR,
} kb_lag_group_status;

typedef struct kb_lag_commit {
    int64_t at_ms;  /* clock of the commit (any clock, the same as evaluate's) */
    int64_t offset; /* committed offset */
    int64_t lag;    /* log end minus offset at that moment, >= 0 */
} kb_lag_commit;

typedef struct kb_lag_window {
    kb_lag_commit *c; /* ring of size entries */
    int32_t size;     /* commits judged together */
    int32_t n;        /* entries held */
    int32_t head;     /* index of the oldest */
} kb_lag_window;

kp_err kb_lag_window_init(kb_lag_window *w, int32_t size);
void kb_lag_window_fini(kb_lag_window *w);
/* Records a commit of offset at at_ms while the log ended at log_end. */
void kb_lag_window_add(kb_lag_window *w, int64_t at_ms, int64_t offset, int64_t log_end);
/* The newest commit, or NULL when none. */
const kb_lag_commit *kb_lag_window_last(const kb_lag_window *w);

/* The partition's status at now, the lag now being lag_now records. */
kb_lag_status kb_lag_evaluate(const kb_lag_window *w, int64_t now, int64_t lag_now,
                              int64_t min_stop_ms);
const char *kb_lag_status_name(kb_lag_status s);

/* Folds one partition's status into a group's (start from KB_LAG_GROUP_OK). */
kb_lag_group_status kb_lag_group_fold(kb_lag_group_status acc, kb_lag_status s);
const char *kb_lag_group_status_name(kb_lag_group_status s);

#endif
