/*
 * ks_checkpoint: Kafka's per-log-dir offset checkpoint files and the
 * clean-shutdown marker.
 *
 * Job: read and durably write recovery-point-offset-checkpoint and
 * log-start-offset-checkpoint, and create / consume .kafka_cleanshutdown.
 *
 * On-disk layout (text, '\n' line ends, at the log dir root):
 *
 *   line        content
 *   ----------- ----------------------------------------------------------
 *   1           version: "0"
 *   2           entry count N (decimal)
 *   3 .. N+2    "<topic> <partition> <offset>" separated by single spaces
 *
 *   .kafka_cleanshutdown: {"version":0,"brokerEpoch":<epoch>}; only its
 *   presence matters (an empty or unparsable file still means clean).
 *
 * Invariants:
 *   1. A checkpoint is replaced atomically: written to <name>.tmp,
 *      fdatasync'ed, renamed over <name>, then the directory fsync'ed.
 *   2. A missing file reads as zero entries; a malformed one is
 *      KP_ERR__CORRUPT (the caller then treats every partition as unknown).
 *   3. The clean-shutdown marker is removed (durably) when consumed, so a
 *      crash after start-up is seen as unclean.
 *
 * Ownership: ks_checkpoint_read returns an array the caller frees with
 * ks_checkpoint_free; writers borrow their input.
 * Threading: any single thread; files are per log dir, so callers serialise
 * writes to one dir.
 * Errors: ks_io errors, KP_ERR__CORRUPT, KP_ERR__NOMEM, KP_ERR__INVAL.
 */
#ifndef KS_CHECKPOINT_H
#define KS_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ks_io.h"

#define KS_CKPT_RECOVERY_POINT "recovery-point-offset-checkpoint"
#define KS_CKPT_LOG_START      "log-start-offset-checkpoint"
#define KS_CKPT_REPLICATION    "replication-offset-checkpoint" /* the high watermarks */
#define KS_CLEAN_SHUTDOWN      ".kafka_cleanshutdown"

typedef struct ks_ckpt_entry {
    char *topic;       /* owned by the array (read) or borrowed (write) */
    int32_t partition;
    int64_t offset;
} ks_ckpt_entry;

kp_err ks_checkpoint_write(const ks_io *io, const char *log_dir, const char *name,
                           const ks_ckpt_entry *entries, size_t n, kp_errctx *ctx);
kp_err ks_checkpoint_read(const ks_io *io, const char *log_dir, const char *name,
                          ks_ckpt_entry **entries, size_t *n, kp_errctx *ctx);
/* Reads dir/name whole (at most 64 MiB) into a NUL-terminated buffer the
 * caller frees; KP_ERR__NOENT when missing. */
kp_err ks_checkpoint_slurp(const ks_io *io, const char *dir, const char *name, char **out,
                           kp_errctx *ctx);
void ks_checkpoint_free(ks_ckpt_entry *entries, size_t n);
/* The offset for topic-partition, or -1 when absent. */
int64_t ks_checkpoint_find(const ks_ckpt_entry *entries, size_t n, const char *topic,
                           int32_t partition);

/* Writes the marker durably (at clean shutdown, after every log closed). */
kp_err ks_clean_shutdown_mark(const ks_io *io, const char *log_dir, int64_t broker_epoch,
                              kp_errctx *ctx);
/* Tells whether the marker exists and removes it durably. */
kp_err ks_clean_shutdown_take(const ks_io *io, const char *log_dir, bool *was_clean,
                              kp_errctx *ctx);

#endif
