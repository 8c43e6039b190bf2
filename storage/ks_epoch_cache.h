/*
 * ks_epoch_cache: one partition's leader epoch cache, Kafka's
 * LeaderEpochFileCache: for each leader epoch that wrote to the log, the
 * offset of its first batch, and the `leader-epoch-checkpoint` file that
 * keeps it in the partition directory.
 *
 * Job: assign (epoch, start offset) as batches are appended; answer the end
 * offset of an epoch (the start of the next larger epoch, or the log end)
 * for Fetch's diverging-epoch check and OffsetForLeaderEpoch; drop entries
 * when the log is truncated at its end or its start moves; read and write
 * the checkpoint.
 *
 * On-disk layout (text, '\n' line ends, <partition dir>/leader-epoch-checkpoint):
 *
 *   line        content
 *   ----------- ------------------------------------------
 *   1           version: "0"
 *   2           entry count N (decimal)
 *   3 .. N+2    "<epoch> <start offset>"
 *
 * Invariants:
 *   1. Epochs and start offsets both strictly increase along the entries
 *      (an assign that breaks this first removes the entries in its way, as
 *      Kafka's does); epochs and offsets are >= 0.
 *   2. The file is replaced atomically (ks_io_write_file_atomic); a missing
 *      file reads as NOENT (the log rebuilds the cache from its batches), a
 *      malformed one as KP_ERR__CORRUPT.
 *
 * Ownership: the cache owns its entry array (ks_epoch_cache_fini frees it).
 * Threading: the owning log's thread only.
 * Errors: KP_ERR__NOMEM, KP_ERR__CORRUPT, KP_ERR__NOENT, ks_io errors.
 */
#ifndef KS_EPOCH_CACHE_H
#define KS_EPOCH_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "ks_io.h"

#define KS_EPOCH_CHECKPOINT "leader-epoch-checkpoint"
#define KS_EPOCH_MAX_ENTRIES (1 << 20) /* a file claiming more is corrupt */

typedef struct ks_epoch_entry {
    int32_t epoch;
    int64_t start_offset;
} ks_epoch_entry;

typedef struct ks_epoch_cache {
    ks_epoch_entry *v;
    int32_t n, cap;
} ks_epoch_cache;

void ks_epoch_cache_init(ks_epoch_cache *c);
void ks_epoch_cache_fini(ks_epoch_cache *c);

/* Kafka's assign: adds (epoch, start) unless the latest entry has this
 * epoch at or below start; entries with an epoch >= epoch or a start >=
 * start go first (invariant 1). *changed tells whether anything moved.
 * KP_ERR__INVAL for a negative epoch or offset (nothing changes). */
kp_err ks_epoch_cache_assign(ks_epoch_cache *c, int32_t epoch, int64_t start, bool *changed);

/* The latest epoch, -1 when empty. */
int32_t ks_epoch_cache_latest(const ks_epoch_cache *c);

/* Kafka's endOffsetFor: for the requested epoch, the largest epoch <= it
 * and where that epoch ends (the start of the next larger one, or leo when
 * it is the latest). (-1, -1) for epoch -1, an empty cache or an epoch past
 * the latest; (epoch, first start) for one below every entry. */
void ks_epoch_cache_end_offset(const ks_epoch_cache *c, int32_t epoch, int64_t leo,
                               int32_t *out_epoch, int64_t *out_end);

/* The log lost every offset >= end: entries starting there go. */
bool ks_epoch_cache_truncate_end(ks_epoch_cache *c, int64_t end);
/* The log now starts at start: entries wholly below it go and the one
 * holding it starts at start. */
bool ks_epoch_cache_truncate_start(ks_epoch_cache *c, int64_t start);
void ks_epoch_cache_clear(ks_epoch_cache *c);

/* dir/leader-epoch-checkpoint written atomically / read into an empty c. */
kp_err ks_epoch_cache_write(const ks_epoch_cache *c, const ks_io *io, const char *dir,
                            kp_errctx *ctx);
kp_err ks_epoch_cache_read(ks_epoch_cache *c, const ks_io *io, const char *dir, kp_errctx *ctx);

#endif
