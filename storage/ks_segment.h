/*
 * ks_segment: one log segment: a .log file of whole record batches plus its
 * .index and .timeindex, named by the segment's base offset.
 *
 * Job: append batch bytes at the end, keep the sparse indexes in step, find
 * the batch holding an offset or the first batch at or after a timestamp,
 * bound a read on batch boundaries, truncate, and delete while readers still
 * hold the file open.
 *
 * On-disk layout (one directory per partition):
 *
 *   file                         content
 *   ---------------------------- -------------------------------------------
 *   <20-digit base offset>.log   record batches back to back (kp_batch.h)
 *   <20-digit base offset>.index sparse offset index (ks_index.h)
 *   <20-digit base offset>.timeindex  sparse time index (ks_index.h)
 *
 * While the log cleaner (ks_compact.h) replaces segments, each of the three
 * names may carry one of Kafka's temporary suffixes: ".cleaned" (being
 * written), ".swap" (complete, about to replace older segments), ".deleted"
 * (replaced, to be unlinked). Only plain names are ever loaded as segments.
 *
 * Invariants:
 *   1. [0, size) of .log holds whole batches whose offsets strictly increase,
 *      starting at or after base_offset; readers never see bytes past size.
 *   2. next_offset is one past the last offset in [0, size) (base_offset
 *      when empty); every index entry points inside [0, size).
 *   3. An index entry is added when more than index_interval bytes were
 *      appended since the previous one: {last offset of the append, position
 *      where the append started}; the time index gains {largest timestamp so
 *      far, its batch's last offset} at the same moments if it grew.
 *   4. A failed append leaves size, next_offset and the indexes unchanged and
 *      the file truncated back to size (best effort).
 *   5. The fd stays open until the last reference goes, even after
 *      ks_segment_remove() unlinked the files.
 *
 * Ownership: ks_segment_create/open return a segment with one reference;
 * ks_segment_ref/unref share it; the last unref closes the files and frees
 * it. A segment copies its ks_io and path, so it may outlive its log.
 *
 * Threading: the event-loop thread owns every field except refs (atomic) and
 * sync_failed (atomic); ks_segment_sync and ks_segment_unref may run on the
 * flush thread. The log cleaner reads sealed segments (read_hdr, pread of
 * fd) on a helper thread, bounded by sizes it copied on the loop; a segment
 * it creates belongs to that thread until the job is handed back.
 *
 * Errors: ks_io errors; KP_ERR__CORRUPT when a batch header inside [0, size)
 * does not parse or runs past size; KP_ERR__NOENT when no batch qualifies.
 */
#ifndef KS_SEGMENT_H
#define KS_SEGMENT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kp_batch.h"
#include "ks_index.h"
#include "ks_io.h"

#define KS_SEGMENT_NAME_DIGITS 20

/* The temporary suffix a segment's three file names carry (see above). */
typedef enum ks_segment_suffix {
    KS_SUFFIX_NONE = 0,    /* "<base>.log" */
    KS_SUFFIX_CLEANED = 1, /* "<base>.log.cleaned" */
    KS_SUFFIX_SWAP = 2,    /* "<base>.log.swap" */
    KS_SUFFIX_DELETED = 3, /* "<base>.log.deleted" */
} ks_segment_suffix;

typedef struct ks_segment_opts {
    int32_t index_interval_bytes; /* bytes between index entries */
    int32_t max_index_entries;    /* offset index entries before a roll */
    int32_t max_time_entries;     /* time index entries before a roll */
} ks_segment_opts;

/* Summary of one append (one or more batches written together). */
typedef struct ks_append_unit {
    int64_t first_offset;     /* base offset of the first batch */
    int64_t last_offset;      /* last offset of the last batch */
    int64_t max_timestamp;    /* largest max_timestamp of the batches */
    int64_t offset_of_max_ts; /* last offset of the batch holding it */
    int64_t first_batch_ts;   /* max_timestamp of the first batch */
} ks_append_unit;

typedef struct ks_segment {
    ks_io io;                 /* copied from the log */
    char *base_path;          /* "<dir>/<20 digits>", owned */
    int fd;                   /* .log, O_RDWR */
    int64_t base_offset;      /* from the file name */
    int64_t next_offset;      /* invariant 2 */
    int64_t size;             /* bytes of whole batches */
    int64_t flushed_size;     /* bytes known durable (loop thread) */
    int64_t max_timestamp;    /* largest batch max_timestamp, -1 if none */
    int64_t offset_of_max_ts; /* last offset of that batch */
    int64_t rolling_ts;       /* first batch's max timestamp, -1 if none; see
                                 ks_segment_rolling_ts */
    int64_t created_ms;       /* created, or opened by this process */
    int64_t mtime_ms;         /* last append (or file mtime) */
    int32_t bytes_since_index;
    int32_t index_interval;
    bool indexes_loaded;      /* index entries in memory are trustworthy */
    bool index_missing;       /* an index file was absent at open */
    bool sealed;              /* no longer the active segment */
    bool removed;             /* files unlinked */
    ks_segment_suffix suffix; /* temporary suffix of the three names */
    atomic_int refs;
    atomic_bool sync_failed;  /* an fdatasync failed: never report durable */
    ks_index oidx;
    ks_index tidx;
} ks_segment;

/* Adds one batch header to u (first: start a new unit). */
void ks_append_unit_add(ks_append_unit *u, const kp_batch_hdr *h, bool first);

/* Creates empty files for a new segment (truncating leftovers). */
kp_err ks_segment_create(const ks_io *io, const char *dir, int64_t base_offset,
                         const ks_segment_opts *o, int64_t now_ms, ks_segment **out,
                         kp_errctx *ctx);
/* Same, with the files named with a temporary suffix (the log cleaner). */
kp_err ks_segment_create_as(const ks_io *io, const char *dir, int64_t base_offset,
                            const ks_segment_opts *o, ks_segment_suffix suffix, int64_t now_ms,
                            ks_segment **out, kp_errctx *ctx);
/* Opens an existing segment at now_ms; size is the file size, indexes are
 * not read. */
kp_err ks_segment_open(const ks_io *io, const char *dir, int64_t base_offset,
                       const ks_segment_opts *o, int64_t now_ms, ks_segment **out,
                       kp_errctx *ctx);

/* The max timestamp of the segment's first batch (what segment.ms counts
 * from, as Kafka's rollingBasedTimestamp), -1 when the segment is empty or
 * that batch has no timestamp; read from the file once after an open. */
int64_t ks_segment_rolling_ts(ks_segment *seg);

/* Parses "<20 digits>.log"; false for any other name. */
bool ks_segment_parse_name(const char *name, int64_t *base_offset);
/* Parses "<20 digits><ext><suffix>" for ext ".log", ".index" or ".timeindex"
 * and any suffix (KS_SUFFIX_NONE included); *is_log tells the .log file. */
bool ks_segment_parse_file(const char *name, int64_t *base_offset, ks_segment_suffix *suffix,
                           bool *is_log);
/* The suffix as text: "", ".cleaned", ".swap" or ".deleted". */
const char *ks_segment_suffix_str(ks_segment_suffix suffix);

/* Reads the index files; KP_ERR__CORRUPT means rebuild them (also returned
 * when an index file was missing at open). */
kp_err ks_segment_load_indexes(ks_segment *seg, kp_errctx *ctx);
/* Empties both index files before a rebuild. */
kp_err ks_segment_reset_indexes(ks_segment *seg, kp_errctx *ctx);
/* Accounts a unit already present at [pos, pos + len): indexes, size,
 * next_offset, timestamps. Used by append and by index rebuilds. */
kp_err ks_segment_track(ks_segment *seg, int64_t pos, int64_t len, const ks_append_unit *u,
                        kp_errctx *ctx);

/* Writes len bytes at size, then tracks them (invariant 4 on failure). */
kp_err ks_segment_append(ks_segment *seg, const uint8_t *buf, size_t len,
                         const ks_append_unit *u, int64_t now_ms, kp_errctx *ctx);

/* Reads and parses the batch header at pos; it must lie inside [0, limit). */
kp_err ks_segment_read_hdr(const ks_segment *seg, int64_t pos, int64_t limit, kp_batch_hdr *h,
                           kp_errctx *ctx);
/* The batch whose last offset is the first >= offset. */
kp_err ks_segment_find(const ks_segment *seg, int64_t offset, int64_t *pos, kp_batch_hdr *h,
                       kp_errctx *ctx);
/* The first batch whose max_timestamp is >= ts. */
kp_err ks_segment_find_time(const ks_segment *seg, int64_t ts, int64_t *pos, kp_batch_hdr *h,
                            kp_errctx *ctx);
/* End of a read starting at the batch boundary start: whole batches only,
 * none reaching max_offset, at most max_bytes unless the first batch alone
 * is larger. */
kp_err ks_segment_slice_end(const ks_segment *seg, int64_t start, int64_t max_bytes,
                            int64_t max_offset, int64_t *end, kp_errctx *ctx);

/* Walks the batch headers after the last offset index entry up to size,
 * setting next_offset, the largest timestamp and bytes_since_index. */
kp_err ks_segment_scan_tail(ks_segment *seg, kp_errctx *ctx);

/* Cuts the segment at the batch boundary pos (<= size) and recomputes
 * next_offset and the largest timestamp. */
kp_err ks_segment_truncate(ks_segment *seg, int64_t pos, kp_errctx *ctx);

/* Marks the segment read-only and writes its final time index entry. */
kp_err ks_segment_seal(ks_segment *seg, kp_errctx *ctx);

/* fdatasync of the .log (and the indexes when with_indexes). */
kp_err ks_segment_sync(ks_segment *seg, bool with_indexes, kp_errctx *ctx);

/* Renames the three files to carry suffix instead of the current one: the
 * indexes first, the .log last, so a crash leaves the .log name telling
 * which step was reached. On failure the renames done are undone (best
 * effort) and the suffix is unchanged. Descriptors stay open and valid. */
kp_err ks_segment_rename(ks_segment *seg, ks_segment_suffix suffix, kp_errctx *ctx);

/* Unlinks the three files (under their current suffix); open descriptors
 * stay readable. */
kp_err ks_segment_remove(ks_segment *seg, kp_errctx *ctx);

ks_segment *ks_segment_ref(ks_segment *seg);
void ks_segment_unref(ks_segment *seg);

#endif
