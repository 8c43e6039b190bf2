/*
 * kb_share_lag: share-group lag (KIP-932) for the metrics and the console.
 *
 * Job: for every share-partition of every share group, the start offset,
 * the partition's high watermark and Kafka's share-partition lag (the
 * records from the start offset to the high watermark not yet acknowledged
 * or archived, kb_share_part_lag, as DescribeShareGroupOffsets v1 answers);
 * and per share group its members and summed lag.
 *
 * It never opens a log: a partition whose log is not online has log_end and
 * lag -1 (and adds nothing to the sum).
 *
 * Ownership: rows borrow from the groups and topics and live only during
 * the visitor's call. Threading: loop thread only. Errors: none.
 */
#ifndef KB_SHARE_LAG_H
#define KB_SHARE_LAG_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_group.h"

typedef struct kb_share_lag_row {
    const char *group;
    const char *topic;
    int32_t partition;
    int64_t start;   /* the share-partition start offset */
    int64_t log_end; /* the high watermark; -1 when the log is not online */
    int64_t lag;     /* -1 when unknown */
} kb_share_lag_row;

typedef struct kb_share_lag_group_row {
    const char *group;
    int32_t members;
    int32_t partitions; /* share-partitions */
    int64_t lag;        /* sum of the known lags */
} kb_share_lag_group_row;

typedef void kb_share_lag_fn(void *arg, const kb_share_lag_row *row);

/* Visits every share-partition of g (nothing when g is not a share group). */
void kb_share_lag_each_of(kb_broker *b, const kb_group *g, kb_share_lag_fn *fn, void *arg);
/* Visits every share-partition of every share group. */
void kb_share_lag_each(kb_broker *b, kb_share_lag_fn *fn, void *arg);
/* g's members and summed lag (zeros when g is not a share group). */
void kb_share_lag_group_of(kb_broker *b, const kb_group *g, kb_share_lag_group_row *out);

#endif
