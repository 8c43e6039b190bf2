/*
 * kb_share_partition: the share-partitions of one share group (KIP-932):
 * per (topic id, partition) the in-flight records between the
 * share-partition start offset and end offset, each AVAILABLE, ACQUIRED
 * (by one member, until its lock deadline), ACKNOWLEDGED or ARCHIVED, with
 * its delivery count; and the group's share sessions (ShareSessionEpoch).
 *
 * Job: acquire records for a member (redeliveries first, then new offsets
 * up to what the caller read from the log), apply acknowledgements
 * (GAP 0, ACCEPT 1, RELEASE 2, REJECT 3, RENEW 4) as Kafka's SharePartition
 * does, release locks whose deadline passed or whose member went, archive a
 * record released with delivery count >= the limit, and advance the start
 * offset past the acknowledged and archived prefix.
 *
 * Invariants:
 *   1. start <= end; the window holds end - start records, at most
 *      KB_SHARE_PART_MAX_WINDOW (and the caller's max.record.locks bound on
 *      what is acquired); offsets below start are done, at or past end are
 *      not delivered yet.
 *   2. The first record of a non-empty window is AVAILABLE or ACQUIRED.
 *   3. An ACQUIRED record has an owner and a finite lock deadline.
 *   4. Share-partitions <= KB_SHARE_PARTS_MAX; sessions <= KB_SHARE_SESSIONS_MAX.
 *
 * Ownership: kb_share_parts owns its partitions, records and sessions;
 * member ids are copied.
 *
 * Threading: loop thread only. Time comes in as an argument.
 *
 * Errors: KP_ERR_INVALID_RECORD_STATE, KP_ERR_INVALID_REQUEST,
 * KP_ERR_SHARE_SESSION_NOT_FOUND, KP_ERR_INVALID_SHARE_SESSION_EPOCH,
 * KP_ERR_SHARE_SESSION_LIMIT_REACHED, KP_ERR__NOMEM.
 */
#ifndef KB_SHARE_PARTITION_H
#define KB_SHARE_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "kp_types.h"

#define KB_SHARE_PART_MAX_WINDOW 10000 /* group.share.partition.max.record.locks' upper bound */
#define KB_SHARE_PARTS_MAX       100000
#define KB_SHARE_SESSIONS_MAX    2000
#define KB_SHARE_SESSION_PARTS   10000 /* partitions one session may hold */
#define KB_SHARE_NO_DEADLINE     INT64_MAX

typedef enum kb_share_rstate {
    KB_SR_AVAILABLE = 0,
    KB_SR_ACQUIRED = 1,
    KB_SR_ACKNOWLEDGED = 2,
    KB_SR_ARCHIVED = 4,
} kb_share_rstate;

typedef enum kb_share_ack {
    KB_ACK_GAP = 0,
    KB_ACK_ACCEPT = 1,
    KB_ACK_RELEASE = 2,
    KB_ACK_REJECT = 3,
    KB_ACK_RENEW = 4,
} kb_share_ack;

typedef struct kb_share_rec {
    uint8_t state;          /* kb_share_rstate */
    int16_t delivery_count;
    uint64_t owner;         /* hash of the member id; 0 when not acquired */
    int64_t lock_deadline;  /* KB_SHARE_NO_DEADLINE when not acquired */
} kb_share_rec;

/* What __share_group_state still has to learn of a share-partition
 * (kb_share_coord writes it): offsets whose persisted state changed, a
 * moved start, or a whole snapshot. */
typedef struct kb_share_persist {
    int64_t dirty_first, dirty_last; /* changed offsets; first > last: none */
    bool start_moved;
    bool snapshot_due;               /* new, reset or restored: a ShareSnapshot */
    int32_t state_epoch;             /* grows when the start is reset */
    int32_t snapshot_epoch;          /* of the last ShareSnapshot written */
    int32_t updates;                 /* ShareUpdates written since it */
} kb_share_persist;

typedef struct kb_share_part {
    kp_uuid topic;
    int32_t partition;
    int64_t start;
    int64_t end;
    kb_share_rec *rec; /* rec[i] is offset start + i, i < end - start */
    int32_t cap;
    kb_share_persist persist;
} kb_share_part;

/* One persisted state batch: Kafka's (FirstOffset, LastOffset,
 * DeliveryState 0/2/4, DeliveryCount). */
typedef struct kb_share_state_batch {
    int64_t first;
    int64_t last;
    int8_t state;
    int16_t delivery_count;
} kb_share_state_batch;

typedef struct kb_share_session {
    char *member_id;
    int32_t epoch; /* the epoch the next request must carry */
    kb_share_part **parts; /* fetched partitions (borrowed from kb_share_parts) */
    int32_t nparts;
    int32_t cap;
} kb_share_session;

typedef struct kb_share_parts kb_share_parts;

/* One acquired range for the response. */
typedef struct kb_share_range {
    int64_t first;
    int64_t last;
    int16_t delivery_count;
} kb_share_range;

/* What the group's settings say for acquisition and release. */
typedef struct kb_share_limits {
    int32_t lock_ms;          /* share.record.lock.duration.ms */
    int16_t delivery_limit;   /* share.delivery.count.limit */
    int32_t max_locks;        /* share.partition.max.record.locks */
} kb_share_limits;

kb_share_parts *kb_share_parts_new(void);
void kb_share_parts_free(kb_share_parts *ps);

uint64_t kb_share_member_key(kp_str member_id);

/* The share-partition, NULL when it was never initialized. */
kb_share_part *kb_share_parts_find(const kb_share_parts *ps, const kp_uuid *topic, int32_t part);
/* The share-partition, made starting at start_offset when new. */
kp_err kb_share_parts_get(kb_share_parts *ps, const kp_uuid *topic, int32_t part,
                          int64_t start_offset, kb_share_part **out);
size_t kb_share_parts_count(const kb_share_parts *ps);
kb_share_part *kb_share_parts_at(const kb_share_parts *ps, size_t i);

/* The first offset a fetch for member would read (the first AVAILABLE
 * record, else end), or -1 when the window is full and nothing is free. */
int64_t kb_share_part_next_fetch(const kb_share_part *sp, const kb_share_limits *lim);
/* Acquires for member the AVAILABLE records in [from, upto] and new
 * offsets from end up to upto (inclusive), at most max_records, and fills
 * up to max_out ranges. log_start moves start up first (offsets retention
 * removed are archived). Returns the number of ranges. */
int32_t kb_share_part_acquire(kb_share_part *sp, kp_str member, int64_t log_start, int64_t upto,
                              int32_t max_records, const kb_share_limits *lim, int64_t now,
                              kb_share_range *out, int32_t max_out);
/* Checks one acknowledgement batch: offsets within the window, ACQUIRED
 * by member, types known (renew only when renew_ok), one type or one per
 * offset. INVALID_RECORD_STATE or INVALID_REQUEST. */
kp_err kb_share_part_check_ack(const kb_share_part *sp, kp_str member, int64_t first, int64_t last,
                               const int8_t *types, int32_t ntypes, bool renew_ok);
/* Applies a checked batch. */
void kb_share_part_ack(kb_share_part *sp, int64_t first, int64_t last, const int8_t *types,
                       int32_t ntypes, const kb_share_limits *lim, int64_t now);
/* Releases (or archives at the delivery limit) every record member holds
 * in every partition; owner 0 releases the expired locks at now instead. */
void kb_share_parts_release(kb_share_parts *ps, uint64_t owner, const kb_share_limits *lim,
                            int64_t now);
int64_t kb_share_parts_next_deadline(const kb_share_parts *ps);
/* Moves the partition's start to offset (AlterShareGroupOffsets, a topic
 * truncated): the window is emptied. */
void kb_share_part_reset(kb_share_part *sp, int64_t offset);

/* ---- persistence (kb_share_coord) ---------------------------------------- */

/* Whether the share-partition (any of them) has something
 * __share_group_state lacks. */
bool kb_share_part_dirty(const kb_share_part *sp);
bool kb_share_parts_dirty(const kb_share_parts *ps);
/* Removes one share-partition (its state was deleted). */
void kb_share_parts_drop(kb_share_parts *ps, kb_share_part *sp);
/* The persisted view of offsets [first, last] of the window, as batches
 * of equal (state, delivery count), into out (room for max); an ACQUIRED
 * record is what it was before this acquisition (AVAILABLE, one delivery
 * fewer), and never-delivered AVAILABLE records are left out. The count
 * of batches, or -1 when max is too small. */
int32_t kb_share_part_batches(const kb_share_part *sp, int64_t first, int64_t last,
                              kb_share_state_batch *out, int32_t max);
/* The records from start that are acknowledged or archived. */
int32_t kb_share_part_done_count(const kb_share_part *sp);
/* Replay: a snapshot replaces the window (start, then the batches);
 * an update moves the start forward (start < 0: unchanged) and
 * overwrites the offsets its batches name. Offsets beyond
 * KB_SHARE_PART_MAX_WINDOW past the start are ignored. KP_ERR__CORRUPT
 * (nothing applied) for a batch with an unknown state, a negative count
 * or first > last, or a start too close to INT64_MAX; KP_ERR__NOMEM. */
kp_err kb_share_part_restore(kb_share_part *sp, bool snapshot, int64_t start,
                             const kb_share_state_batch *b, int32_t n);

/* Kafka's share-partition lag: the records from start to hwm (the log's
 * high watermark) not yet acknowledged or archived; 0 when hwm <= start. */
int64_t kb_share_part_lag(const kb_share_part *sp, int64_t hwm);

/* ---- share sessions ------------------------------------------------------ */

kb_share_session *kb_share_session_find(const kb_share_parts *ps, kp_str member_id);
/* A new session at epoch 1 for member (replacing any it had). */
kp_err kb_share_session_open(kb_share_parts *ps, kp_str member_id, kb_share_session **out);
void kb_share_session_close(kb_share_parts *ps, kb_share_session *s);
/* Adds sp to the session (once). */
kp_err kb_share_session_add(kb_share_session *s, kb_share_part *sp);
void kb_share_session_forget(kb_share_session *s, const kp_uuid *topic, int32_t part);
size_t kb_share_session_count(const kb_share_parts *ps);
kb_share_session *kb_share_session_at(const kb_share_parts *ps, size_t i);

#endif
