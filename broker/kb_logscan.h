/*
 * kb_logscan: walk the batch headers of a partition log in offset order.
 *
 * Job: one loop over a log's batches, reading only each 61-byte header, for
 * the work that needs every batch: rebuilding idempotent-producer state and
 * finding the largest timestamp.
 *
 * Invariants: batches are visited once each, in offset order, from the batch
 * holding `from` up to the log end; the scan holds no segment reference
 * after it returns.
 * Ownership: headers passed to the callback live for the call only.
 * Threading: the log's thread (the loop).
 * Errors: storage read errors, KP_ERR__CORRUPT, or the callback's error
 * (which stops the scan).
 */
#ifndef KB_LOGSCAN_H
#define KB_LOGSCAN_H

#include <stdint.h>

#include "kp_batch.h"
#include "ks_log.h"

typedef kp_err kb_scan_cb(void *arg, const kp_batch_hdr *h, int64_t file_pos, int fd);

kp_err kb_log_scan(const ks_io *io, ks_log *log, int64_t from, kb_scan_cb *cb, void *arg);

#endif
