/*
 * kb_console_lag: consumer lag per group, now and over time, for the
 * console's lag chart.
 *
 * Job: compute a group's lag (high watermark minus committed offset, per
 * partition and summed), and keep a short in-memory history of each
 * group's total lag, sampled every KB_LAG_SAMPLE_MS on the loop and on
 * demand when the console shows a group (at most once a second).
 *
 * Invariants:
 *   1. A series holds at most KB_LAG_POINTS points, oldest first, with
 *      strictly increasing times; at most KB_LAG_GROUPS groups are tracked
 *      (the rest get no history), and a group that vanished is dropped at
 *      the next sample.
 *   2. A sample visits each tracked group's committed offsets once; no I/O.
 *
 * Ownership: the history owns its series and their group names.
 * Threading: loop thread only.
 */
#ifndef KB_CONSOLE_LAG_H
#define KB_CONSOLE_LAG_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_group.h"
#include "kb_map.h"

#define KB_LAG_POINTS    720   /* one hour at the sampling period */
#define KB_LAG_GROUPS    1000
#define KB_LAG_SAMPLE_MS 5000
#define KB_LAG_DEMAND_MS 1000

typedef struct kb_lag_point {
    int64_t ts_ms; /* wall clock */
    int64_t lag;   /* records, summed over the group's partitions */
} kb_lag_point;

typedef struct kb_lag_series {
    char *group;
    kb_lag_point pts[KB_LAG_POINTS];
    int32_t head; /* index of the oldest */
    int32_t n;
    uint32_t seen; /* sweep number of the last sample that found the group */
} kb_lag_series;

typedef struct kb_console_lag {
    kb_broker *b;
    kb_map series; /* kb_lag_series *, by group id */
    kb_timer timer;
    uint32_t sweep;
} kb_console_lag;

kp_err kb_console_lag_start(kb_broker *b, kb_console_lag *lag);
void kb_console_lag_stop(kb_console_lag *lag);

/* The wall clock in ms (lag samples, produced records, commits). */
int64_t kb_console_wall_ms(void);

/* Sum of the group's known partition lags (kb_lag's rows). */
int64_t kb_console_lag_total(kb_broker *b, const kb_group *g);
/* Samples g now unless sampled in the last KB_LAG_DEMAND_MS; then its
 * series, or NULL when it has none. */
const kb_lag_series *kb_console_lag_series(kb_console_lag *lag, const kb_group *g);
/* The i-th point (0 = oldest) of s. */
const kb_lag_point *kb_console_lag_point(const kb_lag_series *s, int32_t i);

#endif
