/*
 * ks_log: one partition's log: an ordered list of segments in the directory
 * <log dir>/<topic>-<partition>, the last of which (the active segment)
 * takes appends.
 *
 * Job: open (recovering as needed) or create a partition log; append record
 * batches, assigning offsets; read by offset as a file slice on batch
 * boundaries; report log start / end offsets and high watermark; find an
 * offset by timestamp; truncate; advance the log start offset; prepare and
 * complete flushes for ks_flush; expose segments to ks_retention and
 * ks_compact (which may replace sealed segments by cleaned ones, leaving
 * gaps in the offsets: a read at a missing offset starts at the next batch).
 *
 * On-disk layout:
 *
 *   path                                      content
 *   ----------------------------------------- --------------------------------
 *   <log dir>/<topic>-<partition>/            one directory per partition
 *     <20-digit base offset>.log|.index|.timeindex   see ks_segment.h
 *     ... with .cleaned/.swap/.deleted suffixes      see ks_compact.h; open
 *                                                    finishes or discards them
 *   <log dir>/recovery-point-offset-checkpoint       see ks_checkpoint.h
 *   <log dir>/log-start-offset-checkpoint            see ks_checkpoint.h
 *   <log dir>/replication-offset-checkpoint          see ks_checkpoint.h (cluster mode)
 *   <log dir>/.kafka_cleanshutdown                   see ks_checkpoint.h
 *   <partition dir>/leader-epoch-checkpoint          see ks_epoch_cache.h: kept by
 *                                                    appends (each batch's epoch),
 *                                                    truncation and the log start;
 *                                                    rebuilt from the batches when
 *                                                    missing or bad
 *
 * Invariants:
 *   1. Segment base offsets strictly increase; every segment starts at or
 *      after the previous segment's end; only the last segment is written.
 *   2. log_start <= high_watermark <= log_end; recovery_point <= log_end.
 *   3. An append either becomes wholly visible (log_end moves past it) or
 *      leaves the log exactly as before; a failed append is never reported
 *      as a success.
 *   4. Bytes below the recovery point are durable (fdatasync'ed) whole
 *      batches with valid CRCs.
 *   5. After a failed fdatasync the log is poisoned: appends and flushes
 *      fail with KP_ERR__IO until the log is closed and reopened (which
 *      runs recovery), because the page cache state is unknown.
 *
 * Ownership: ks_log_open/create return a log the caller frees with
 * ks_log_close. Append rewrites the caller's buffer in place and does not
 * keep it. A ks_log_slice holds a segment reference: its fd stays valid, and
 * the bytes readable, until ks_log_slice_release, even if retention or
 * truncation removed the segment meanwhile. A log with flushes in flight
 * (ks_log_flush_pending() > 0) must not be closed.
 *
 * Threading: every function runs on the thread that owns the log (the
 * event loop), except ks_log_flush_target_sync, ks_log_slice_release and
 * ks_log_flush_target_fini, which any thread may call.
 *
 * Errors: KP_ERR_OFFSET_OUT_OF_RANGE (read or truncate outside the log),
 * KP_ERR_RECORD_LIST_TOO_LARGE (batch larger than a segment),
 * KP_ERR__MALFORMED (append buffer not whole v2 batches), KP_ERR__INVAL
 * (config), KP_ERR__CORRUPT (a segment read found a bad header),
 * KP_ERR__NOSPC / KP_ERR__IO (disk full, I/O error, poisoned log),
 * KP_ERR__NOMEM, KP_ERR__NOENT (timestamp past every batch).
 */
#ifndef KS_LOG_H
#define KS_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include "kp_types.h"
#include "ks_epoch_cache.h"
#include "ks_io.h"
#include "ks_recover.h"
#include "ks_segment.h"

typedef enum ks_timestamp_type {
    KS_TS_CREATE_TIME = 0,     /* keep the producer's timestamps */
    KS_TS_LOG_APPEND_TIME = 1, /* stamp the broker's time on append */
} ks_timestamp_type;

/* Per-topic settings, filled by the broker from Kafka's config keys. */
typedef struct ks_log_config {
    int64_t segment_bytes;        /* segment.bytes: roll above this */
    int64_t segment_ms;           /* segment.ms: roll past this span of time (should_roll) */
    int32_t index_interval_bytes; /* index.interval.bytes */
    int32_t segment_index_bytes;  /* segment.index.bytes: roll when full */
    int64_t retention_ms;         /* retention.ms, -1 for no limit */
    int64_t retention_bytes;      /* retention.bytes, -1 for no limit */
    int64_t flush_messages;       /* flush.messages (INT64_MAX: never) */
    int64_t flush_ms;             /* flush.ms (INT64_MAX: never) */
    ks_timestamp_type message_timestamp_type; /* message.timestamp.type */
} ks_log_config;

/* What the broker knows at open time, from the log dir's checkpoints. */
typedef struct ks_log_open_args {
    int64_t recovery_point;   /* -1 when not checkpointed */
    int64_t log_start_offset; /* -1 when not checkpointed */
    bool clean_shutdown;      /* .kafka_cleanshutdown was present */
    int64_t now_ms;           /* wall clock (injectable) */
} ks_log_open_args;

typedef struct ks_append_result {
    int64_t base_offset;     /* offset given to the first record */
    int64_t last_offset;     /* offset given to the last record */
    int64_t log_append_time; /* broker time stamped, -1 for CreateTime */
    int64_t log_start_offset;
    int32_t batches;         /* batches in the append */
} ks_append_result;

/* A range of a segment file to send: whole batches only. */
typedef struct ks_log_slice {
    kp_file_range range;  /* fd, off, len; len 0 when nothing to send */
    ks_segment *seg;      /* reference; NULL when len is 0 */
    int64_t first_offset; /* base offset of the first batch */
} ks_log_slice;

/* Durability work captured by ks_log_flush_prepare for a helper thread. */
typedef struct ks_log_flush_target {
    ks_segment **segs;   /* references to segments with unflushed bytes */
    int64_t *sizes;      /* their sizes at prepare time */
    bool *sealed;        /* sync their indexes too */
    int32_t n;
    char *dir;           /* partition dir to fsync after a roll, or NULL */
    ks_io io;            /* for the directory fsync */
    int64_t epoch;       /* truncation count at prepare */
    int64_t offset;      /* log end at prepare: the new recovery point */
    int64_t messages;    /* appended-message count at prepare */
} ks_log_flush_target;

typedef struct ks_log ks_log;

void ks_log_config_default(ks_log_config *cfg);
kp_err ks_log_config_check(const ks_log_config *cfg, kp_errctx *ctx);

/* Opens <log_dir>/<topic>-<partition>, creating it when missing, and
 * recovers it; rep (optional) says what recovery truncated. */
kp_err ks_log_open(const ks_io *io, const char *log_dir, const char *topic, int32_t partition,
                   const ks_log_config *cfg, const ks_log_open_args *args, ks_log **out,
                   ks_recover_report *rep, kp_errctx *ctx);

/* Flushes every unflushed byte, trims nothing, frees the log. The log is
 * freed even when the final flush fails. */
kp_err ks_log_close(ks_log *log, kp_errctx *ctx);

/* Removes every segment and the partition directory, then frees the log. */
kp_err ks_log_delete(ks_log *log, kp_errctx *ctx);

/* The config in force (borrowed until ks_log_set_config or close). */
const ks_log_config *ks_log_config_of(const ks_log *log);

/* Applies a new config (e.g. after AlterConfigs); checked first. */
kp_err ks_log_set_config(ks_log *log, const ks_log_config *cfg, kp_errctx *ctx);

/* Appends len bytes of one or more whole v2 batches (already validated by
 * the caller: CRC, records). Rewrites base offsets and leader epoch, and for
 * LogAppendTime topics the timestamps and CRC. Rolls first when needed. */
kp_err ks_log_append(ks_log *log, uint8_t *batches, size_t len, int32_t leader_epoch,
                     int64_t now_ms, ks_append_result *out, kp_errctx *ctx);

/* A follower's append: whole v2 batches kept byte for byte (offsets and
 * partitionLeaderEpoch as the leader wrote them). Each CRC is checked and
 * the first offset must be at or past the log end, each batch after the
 * one before (KP_ERR__INVAL otherwise, KP_ERR_CORRUPT_MESSAGE for a bad
 * CRC). Never moves the high watermark. */
kp_err ks_log_append_replica(ks_log *log, const uint8_t *batches, size_t len, int64_t now_ms,
                             ks_append_result *out, kp_errctx *ctx);

/* Replicated (cluster mode): appends leave the high watermark where it is;
 * ks_log_set_high_watermark moves it. */
void ks_log_set_replicated(ks_log *log, bool replicated);

/* Slice starting with the whole batch holding offset, of whole batches
 * below max_offset (exclusive; pass the high watermark), at most max_bytes
 * unless the first batch alone is larger. offset == end gives an empty
 * slice; outside [log start, log end] gives OFFSET_OUT_OF_RANGE. */
kp_err ks_log_read(ks_log *log, int64_t offset, int32_t max_bytes, int64_t max_offset,
                   ks_log_slice *out, kp_errctx *ctx);
void ks_log_slice_release(ks_log_slice *s);

/* First batch whose max timestamp >= ts: its base offset (not below the log
 * start) and timestamp. KP_ERR__NOENT when every batch is older. Batch
 * granular: the record-level offset inside the batch is not resolved. */
kp_err ks_log_offset_for_time(ks_log *log, int64_t ts, int64_t *offset, int64_t *timestamp,
                              kp_errctx *ctx);

/* The timestamp of the batch holding offset, or of a later one, from what
 * memory holds (no I/O): the first time index entry at or after offset in
 * its segment (an upper bound, exact within an indexed batch), else the
 * first batch's time when offset is the segment's base, else the segment's
 * largest. -1 when offset is outside [log start, log end) or unknown. */
int64_t ks_log_time_near(const ks_log *log, int64_t offset);

int64_t ks_log_start_offset(const ks_log *log);
int64_t ks_log_end_offset(const ks_log *log);
int64_t ks_log_high_watermark(const ks_log *log);
int64_t ks_log_recovery_point(const ks_log *log);
int64_t ks_log_size(const ks_log *log);
const char *ks_log_topic(const ks_log *log);
int32_t ks_log_partition(const ks_log *log);
const char *ks_log_dir(const ks_log *log);

/* Moves the high watermark within [log start, log end]. Appends move it to
 * the log end themselves (single replica). */
void ks_log_set_high_watermark(ks_log *log, int64_t offset);

/* Removes every batch holding an offset >= offset (the whole batch holding
 * it). Offsets at or below the log start empty the log, restarting it at
 * offset. */
kp_err ks_log_truncate_to(ks_log *log, int64_t offset, int64_t now_ms, kp_errctx *ctx);

/* DeleteRecords: raises the log start offset (never beyond the high
 * watermark, else OFFSET_OUT_OF_RANGE); retention removes the segments. */
kp_err ks_log_advance_start(ks_log *log, int64_t offset, kp_errctx *ctx);

/* ---- leader epochs (ks_epoch_cache.h) ------------------------------------ */

/* A leader's new epoch starts at start (its log end when it takes over). */
kp_err ks_log_assign_epoch(ks_log *log, int32_t epoch, int64_t start, kp_errctx *ctx);
/* The epoch of the newest cache entry (the last batch's), -1 when none. */
int32_t ks_log_latest_epoch(const ks_log *log);
/* ks_epoch_cache_end_offset with the log end. */
void ks_log_epoch_end_offset(const ks_log *log, int32_t epoch, int32_t *out_epoch,
                             int64_t *out_end);
const ks_epoch_cache *ks_log_epochs(const ks_log *log);

/* Rolls a new active segment now (no-op when the active one is empty). */
kp_err ks_log_roll(ks_log *log, int64_t now_ms, kp_errctx *ctx);

/* ---- segments, for ks_retention ---------------------------------------- */

int32_t ks_log_segment_count(const ks_log *log);
/* Segment i (0 = oldest) with its indexes loaded; borrowed until the log
 * changes. */
kp_err ks_log_segment_at(ks_log *log, int32_t i, ks_segment **seg, kp_errctx *ctx);
/* Takes the n oldest segments out of the log (never the active one) into
 * out, references included, and raises the log start to the new first
 * segment's base offset when below it. */
int32_t ks_log_detach_oldest(ks_log *log, int32_t n, ks_segment **out);

/* ---- segments, for ks_compact ------------------------------------------ */

/* The options new segments of this log get (index interval and sizes). */
void ks_log_segment_opts(const ks_log *log, ks_segment_opts *o);
/* Position of seg in the log (0 = oldest), -1 when it is not there. */
int32_t ks_log_segment_find(const ks_log *log, const ks_segment *seg);
/* Replaces the sealed segments [first, first + n) (never the active one) by
 * seg, which must start at the first one's base offset and end at or
 * before the next segment's base offset (invariant 1). The replaced
 * segments go to old[0..n), references included; readers holding them keep
 * reading. KP_ERR__INVAL when the bounds do not hold (nothing changes). */
kp_err ks_log_replace_segments(ks_log *log, int32_t first, int32_t n, ks_segment *seg,
                               ks_segment **old, kp_errctx *ctx);
/* Bumped by every truncation: a cleaning planned before one is stale. */
int64_t ks_log_truncation_count(const ks_log *log);
/* The cleaner's progress: offsets below it are clean; -1 when unknown
 * (then everything from the log start counts as dirty). */
int64_t ks_log_cleaner_offset(const ks_log *log);
void ks_log_set_cleaner_offset(ks_log *log, int64_t offset);

/* ---- flushing, for ks_flush -------------------------------------------- */

/* Captures what a flush must sync now. */
kp_err ks_log_flush_prepare(ks_log *log, ks_log_flush_target *t, kp_errctx *ctx);
/* Does the fdatasyncs (any thread). */
kp_err ks_log_flush_target_sync(ks_log_flush_target *t, kp_errctx *ctx);
/* Records the result on the log (owning thread): on success the recovery
 * point advances; on failure the log is poisoned (invariant 5). */
void ks_log_flush_complete(ks_log *log, const ks_log_flush_target *t, kp_err err,
                           int64_t now_ms);
void ks_log_flush_target_fini(ks_log_flush_target *t);
/* prepare + sync + complete on the calling thread. */
kp_err ks_log_flush(ks_log *log, int64_t now_ms, kp_errctx *ctx);

int64_t ks_log_unflushed_messages(const ks_log *log);
int64_t ks_log_last_flush_ms(const ks_log *log);
int32_t ks_log_flush_pending(const ks_log *log);
void ks_log_flush_pending_add(ks_log *log, int32_t delta);

#endif
