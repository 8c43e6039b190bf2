/*
 * kb_lag: consumer lag per group and partition, with a verdict, for the
 * metrics and the console; the group side of the retention guard.
 *
 * Job: answer, for every group's committed offset, the lag in records
 * (high watermark minus committed offset, as kafka_exporter computes
 * kafka_consumergroup_lag; for read_committed consumers this counts open
 * and aborted transactional records too, as kafka_exporter does), the lag
 * in seconds (wall clock now minus the timestamp of the next unread
 * record) and the Burrow-style status (kb_lag_status.h) over the window of
 * the last runnel.lag.window.commits commits. Every
 * runnel.lag.check.interval.ms it re-judges the tracked partitions and logs
 * each change: msg="lag status" group=G topic=T partition=P change=OK->STOPPED.
 * It registers the readers' hook of partition/'s retention guard and logs,
 * once per group and partition, a fetch answered OFFSET_OUT_OF_RANGE.
 *
 * Lag in seconds never blocks the loop: it reads the partition's in-memory
 * time index and segment summary (ks_log_time_near), which give the time of
 * the batch holding the committed offset or of a later batch. So the value
 * is exact when the offset falls in an indexed batch and otherwise a lower
 * bound, off by at most one index interval (log.index.interval.bytes) of
 * records. -1 when the log is not online or holds no timestamps.
 *
 * For metrics (kafka_exporter's names):
 *   kafka_consumergroup_lag{consumergroup,topic,partition}     row.lag
 *   kafka_consumergroup_current_offset{consumergroup,topic,partition}  row.committed
 *   kafka_consumergroup_members{consumergroup}                grow.members
 *   lag seconds and status per partition                      row.lag_ms, row.status
 *   status per group (OK/WARNING/ERROR)                       grow.status
 *
 * Invariants:
 *   1. A partition's window holds only commits made since start-up (or
 *      since its entry was created); a group restored from
 *      __consumer_offsets is judged OK until it commits again.
 *   2. At most KB_LAG_MAX_TRACKED windows exist; commits of partitions past
 *      the cap are not judged (their status is OK) and are counted.
 *   3. A window goes when its group or its committed offset does.
 *   4. One out-of-range line per (group or client id, topic, partition),
 *      remembered in a bounded set that is cleared when full.
 *
 * Cost: the visitors, and the guard's readers' hook (called only for a
 * partition retention is about to shrink), walk every group: O(groups) per
 * such partition, on the loop. A broker with thousands of groups and of
 * partitions would want an index by partition (not built yet).
 *
 * Ownership: the group coordinator owns the kb_lag (kb_group_coord_lag);
 * the rows handed to a visitor borrow from the groups and live only during
 * the call.
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM from kb_lag_start.
 */
#ifndef KB_LAG_H
#define KB_LAG_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_group.h"
#include "kb_lag_status.h"

#define KB_LAG_MAX_TRACKED 100000

typedef struct kb_lag kb_lag;

kp_err kb_lag_start(kb_broker *b, kb_lag **out);
void kb_lag_stop(kb_broker *b, kb_lag *lag);

/* g committed offs (called once they are in g's map). */
void kb_lag_committed(kb_broker *b, const kb_group *g, const kb_offset *offs, int32_t n);

typedef struct kb_lag_row {
    const char *group;
    const char *topic;
    int32_t partition;
    int64_t committed; /* the group's committed offset */
    int64_t commit_ts; /* when it was committed (wall clock ms) */
    int64_t log_end;   /* the high watermark; -1 when the log is not online */
    int64_t lag;       /* records: log_end - committed, at least 0; -1 unknown */
    int64_t lag_ms;    /* ms since the next unread record was written; 0 at lag 0; -1 unknown */
    kb_lag_status status;
} kb_lag_row;

typedef struct kb_lag_group_row {
    const char *group;
    int32_t members;     /* classic or KIP-848 members */
    int32_t partitions;  /* committed offsets */
    int64_t lag;         /* sum of the partitions' known lags */
    kb_lag_group_status status;
} kb_lag_group_row;

typedef void kb_lag_row_fn(void *arg, const kb_lag_row *row);
typedef void kb_lag_group_fn(void *arg, const kb_lag_group_row *row);

/* Visits every committed offset of every group (O(committed offsets)). */
void kb_lag_each(kb_broker *b, kb_lag_row_fn *fn, void *arg);
/* Visits every group (O(committed offsets) too: statuses are folded). */
void kb_lag_each_group(kb_broker *b, kb_lag_group_fn *fn, void *arg);
/* The same for one group: its committed offsets, and its folded row. */
void kb_lag_each_of(kb_broker *b, const kb_group *g, kb_lag_row_fn *fn, void *arg);
void kb_lag_group_of(kb_broker *b, const kb_group *g, kb_lag_group_row *out);

/* Commits not judged because KB_LAG_MAX_TRACKED windows exist. */
uint64_t kb_lag_untracked(const kb_lag *lag);

/* A fetch of (topic, partition) at offset by client_id got
 * OFFSET_OUT_OF_RANGE, the log starting at log_start. The request carries
 * no group: the group is the one with a member of that client id whose
 * committed offset for the partition is offset, else any group committed
 * at offset, else only the client id is logged. */
void kb_lag_out_of_range(kb_broker *b, kp_str client_id, const char *topic, int32_t partition,
                         int64_t offset, int64_t log_start);

#endif
