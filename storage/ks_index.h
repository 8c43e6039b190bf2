/*
 * ks_index: a segment's sparse offset index (.index) and time index
 * (.timeindex), in Kafka's file formats.
 *
 * Job: map a relative offset to the file position of a batch boundary, and a
 * timestamp to a relative offset, by binary search over entries held in
 * memory and mirrored to the index file by appends.
 *
 * On-disk layout (big-endian, entries back to back, no header, no checksum):
 *
 *   .index      offset size meaning
 *               0      4    offset - segment base offset (int32)
 *               4      4    byte position of a batch start in .log (int32)
 *
 *   .timeindex  offset size meaning
 *               0      8    largest timestamp so far (int64, ms)
 *               8      4    offset - segment base offset at that point (int32)
 *
 * Both are written trimmed (no pre-allocated zero tail). A file whose size is
 * not a multiple of the entry size, whose keys do not strictly increase, or
 * whose values decrease or pass a limit is corrupt and gets rebuilt from the
 * log by the caller.
 *
 * Invariants (an entry is {key, val}: offset index {relative offset,
 * position}; time index {timestamp, relative offset}):
 *   1. Keys strictly increase; values never decrease.
 *   2. The file holds exactly the n entries in memory, in order, once the
 *      last append or truncate returned success.
 *   3. n <= max_entries; ks_index_full() tells the segment to roll.
 *
 * Ownership: ks_index is embedded in its segment (_init/_fini); it owns its
 * fd and entry arrays. Callers pass the ks_io.
 * Threading: event-loop thread only, except ks_index_sync (any thread that
 * holds a segment reference).
 * Errors: ks_io errors; KP_ERR__CORRUPT from ks_index_load; KP_ERR__NOMEM.
 */
#ifndef KS_INDEX_H
#define KS_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "ks_io.h"

typedef enum ks_index_kind {
    KS_INDEX_OFFSET = 0, /* 8-byte entries */
    KS_INDEX_TIME = 1,   /* 12-byte entries */
} ks_index_kind;

#define KS_INDEX_OFFSET_ENTRY 8
#define KS_INDEX_TIME_ENTRY   12

typedef struct ks_index {
    int fd;              /* -1 until opened */
    ks_index_kind kind;  /* which file format */
    int32_t n;           /* entries in memory and on disk */
    int32_t cap;         /* allocated entries */
    int32_t max_entries; /* from segment.index.bytes */
    int64_t *keys;       /* relative offsets or timestamps */
    int32_t *vals;       /* positions or relative offsets */
} ks_index;

void ks_index_init(ks_index *ix, ks_index_kind kind, int32_t max_entries);
void ks_index_fini(ks_index *ix, const ks_io *io);

/* Opens (creating when missing) the file at path; does not read it. */
kp_err ks_index_open(ks_index *ix, const ks_io *io, const char *path, bool truncate,
                     kp_errctx *ctx);

/* Reads and checks the file: keys must be < key_limit, values < val_limit.
 * On KP_ERR__CORRUPT the index is left empty in memory. */
kp_err ks_index_load(ks_index *ix, const ks_io *io, int64_t key_limit, int64_t val_limit,
                     kp_errctx *ctx);

/* Appends {key, val} to file and memory; the key must exceed the last. */
kp_err ks_index_append(ks_index *ix, const ks_io *io, int64_t key, int32_t val,
                       kp_errctx *ctx);

/* Keeps the first n entries, in memory and on disk. */
kp_err ks_index_truncate(ks_index *ix, const ks_io *io, int32_t n, kp_errctx *ctx);

kp_err ks_index_sync(const ks_index *ix, const ks_io *io, kp_errctx *ctx);

bool ks_index_full(const ks_index *ix);

/* Index of the last entry whose key is <= key (< key when strict), or -1. */
int32_t ks_index_floor_key(const ks_index *ix, int64_t key, bool strict);

/* Index of the last entry whose value is <= val, or -1. */
int32_t ks_index_floor_val(const ks_index *ix, int64_t val);

/* Number of leading entries whose value is < val (for truncation). */
int32_t ks_index_count_below_val(const ks_index *ix, int64_t val);

#endif
