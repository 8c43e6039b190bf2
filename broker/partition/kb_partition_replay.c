/*
 * kb_partition_replay: the coordinators' side of kb_partition_log.h: their
 * records appended one batch each (kb_partition_log_append_record) and
 * their internal topics read back, all partitions at start-up
 * (kb_partition_log_replay, _replay_records) or one partition in steps
 * (kb_partition_log_replay_batch, driven by kb_coord_load).
 *
 * Invariants: a replay hands records of uncompressed, non-control batches
 * only; every other record is counted skipped, never guessed at.
 *
 * Ownership: nothing is kept; the callbacks own what they build.
 *
 * Threading: loop thread only.
 */
#include <stdlib.h>

#include "kb_logscan.h"
#include "kb_partition_log.h"
#include "kp_batch.h"
#include "kp_records.h"

kp_err kb_partition_log_replay(kb_broker *b, kb_topic *t, size_t max_batch,
                               kb_scan_batch_cb *cb, void *arg, int32_t *failed)
{
    for (int32_t p = 0; p < t->npartitions; p++) {
        ks_log *log;
        kp_err e = kb_partition_log_get(b, t, p, &log);
        if (e == KP_ERR_NONE)
            e = kb_log_scan_batches(kb_partition_log_io(b), log, max_batch, cb, arg);
        if (e != KP_ERR_NONE) {
            *failed = p;
            return e;
        }
    }
    return KP_ERR_NONE;
}

static kp_err replay_record(void *arg, const kp_record *rec, kp_arena *a)
{
    kb_record_replay *rr = arg;
    kp_err e = rr->cb(rr->arg, rec, a);
    rr->counts.records++;
    if (e == KP_ERR__NOMEM)
        return e;
    rr->counts.skipped += e != KP_ERR_NONE;
    return KP_ERR_NONE;
}

kp_err kb_partition_log_replay_batch(void *replay, const kp_batch_hdr *h, const uint8_t *batch,
                                     size_t len)
{
    kb_record_replay *rr = replay;
    if (batch == NULL || (h->attributes & (KP_BATCH_ATTR_CODEC_MASK | KP_BATCH_ATTR_CONTROL))) {
        rr->counts.skipped += batch == NULL ? h->records_count : 0;
        return KP_ERR_NONE;
    }
    return kb_batch_each_record(h, batch, len, replay_record, rr);
}

kp_err kb_partition_log_replay_records(kb_broker *b, kb_topic *t, size_t max_batch,
                                       kb_record_cb *cb, void *arg, kb_replay_counts *counts,
                                       int32_t *failed)
{
    kb_record_replay rr = {cb, arg, *counts};
    kp_err e = kb_partition_log_replay(b, t, max_batch, kb_partition_log_replay_batch, &rr, failed);
    *counts = rr.counts;
    return e;
}

kp_err kb_partition_log_append_record(kb_broker *b, kb_topic *t, int32_t partition, int64_t ts,
                                      kp_slice key, kp_slice value)
{
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, 0, -1, -1, -1);
    kp_batch_builder_add(&bb, ts, key, value, NULL, 0);
    size_t len;
    uint8_t *buf = kp_batch_builder_finish(&bb, &len);
    kp_batch_builder_fini(&bb);
    if (buf == NULL)
        return KP_ERR__NOMEM;
    ks_append_result res;
    kp_err e = kb_partition_log_append(b, t, partition, buf, len, &res);
    free(buf);
    if (e == KP_ERR_NONE)
        kb_partition_log_appended(b, t, partition);
    return e;
}
