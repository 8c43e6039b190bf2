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
#include "kp_records.h"
#include "ks_log.h"

typedef kp_err kb_scan_cb(void *arg, const kp_batch_hdr *h, int64_t file_pos, int fd);

kp_err kb_log_scan(const ks_io *io, ks_log *log, int64_t from, kb_scan_cb *cb, void *arg);

/* The same walk, handing over each whole batch read into memory after a CRC
 * check (the coordinators replay their topics' records this way). A batch
 * larger than max_batch is passed with batch NULL; one that fails the CRC
 * check stops the scan with KP_ERR__CORRUPT. The bytes live for the call. */
typedef kp_err kb_scan_batch_cb(void *arg, const kp_batch_hdr *h, const uint8_t *batch,
                                size_t len);
kp_err kb_log_scan_batches(const ks_io *io, ks_log *log, size_t max_batch, kb_scan_batch_cb *cb,
                           void *arg);

/* One bounded step of the same walk: the whole batches from the one holding
 * from (the log start when below it) and below end (exclusive; pass the
 * high watermark), about step_bytes of them (at least one batch); *next
 * gets the offset after the last one visited (from when none: the walk is
 * over or stuck). A caller resumes with from = *next until *next >= end. */
kp_err kb_log_scan_batches_step(const ks_io *io, ks_log *log, int64_t from, int64_t end,
                                int32_t step_bytes, size_t max_batch, kb_scan_batch_cb *cb,
                                void *arg, int64_t *next);

/* Calls cb for each record of an uncompressed whole batch (as handed to a
 * kb_scan_batch_cb), with a scratch arena reset between records; stops at
 * the callback's first error or KP_ERR__CORRUPT. */
typedef kp_err kb_record_cb(void *arg, const kp_record *rec, kp_arena *a);
kp_err kb_batch_each_record(const kp_batch_hdr *h, const uint8_t *batch, size_t len,
                            kb_record_cb *cb, void *arg);

#endif
