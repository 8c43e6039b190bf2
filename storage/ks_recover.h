/*
 * ks_recover: bring a partition's segments to a consistent state at open.
 *
 * Job: after an unclean shutdown, scan every segment from the one holding
 * the recovery point onwards, batch by batch (length, magic, offsets, CRC-32C),
 * rebuilding its indexes, truncate a torn or corrupt tail at the last valid
 * batch and drop any later segment; after a clean one, read only what locates
 * the log end (the active segment's index and the batch headers after its last
 * entry). Also rebuilds an index found missing or corrupt.
 *
 * Invariants:
 *   1. Afterwards every segment holds whole batches with strictly increasing
 *      offsets, each segment starting at or after the previous one's end.
 *   2. A scanned segment keeps exactly its longest valid prefix; nothing is
 *      repaired or rewritten.
 *   3. Start-up never fails because of a torn or corrupt tail: only I/O
 *      errors (and out of memory) fail recovery.
 *
 * Ownership: works on the caller's array of segment references; segments it
 * drops are removed from disk, unreferenced and taken out of the array.
 * Threading: the thread that owns the log being opened.
 * Errors: ks_io errors, KP_ERR__NOMEM.
 */
#ifndef KS_RECOVER_H
#define KS_RECOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "ks_segment.h"

/* What recovery changed, for the broker to log once. */
typedef struct ks_recover_report {
    int32_t segments_scanned; /* segments read batch by batch */
    int32_t indexes_rebuilt;  /* segments whose indexes were rebuilt */
    int32_t segments_dropped; /* whole segments after a corrupt tail */
    int64_t truncated_bytes;  /* bytes cut, dropped segments included */
    int64_t truncated_base;   /* base offset of the truncated segment, -1 */
    int64_t truncated_pos;    /* position cut at in that segment, -1 */
    char reason[128];         /* first problem seen, "" when none */
} ks_recover_report;

void ks_recover_report_init(ks_recover_report *rep);

/* Scans seg from position 0, rebuilding its indexes; batches must start at or
 * after min_offset. *valid_end receives the end of the valid prefix (the file
 * itself is not touched). When check_crc is false only headers are read. */
kp_err ks_recover_scan(ks_segment *seg, int64_t min_offset, bool check_crc, int64_t *valid_end,
                       ks_recover_report *rep, kp_errctx *ctx);

/* Recovers segs[0..*n) (sorted by base offset, *n >= 1) as described above.
 * recovery_point: offsets below it are known durable and consistent. */
kp_err ks_recover_segments(ks_segment **segs, int32_t *n, int64_t recovery_point, bool clean,
                           ks_recover_report *rep, kp_errctx *ctx);

/* Loads seg's indexes, rebuilding them from the log when missing or
 * corrupt (the log itself is not truncated by a rebuild). */
kp_err ks_recover_indexes(ks_segment *seg, ks_recover_report *rep, kp_errctx *ctx);

#endif
