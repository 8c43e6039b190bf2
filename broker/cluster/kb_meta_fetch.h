/*
 * kb_meta_fetch: this broker following __cluster_metadata as a KRaft
 * observer: Fetch v17 of partition 0 of topic id AAAAAAAAAAAAAAAAAAAAAQ from
 * the quorum leader, with ReplicaState {this node's id, epoch -1} and its
 * directory id (so `kafka-metadata-quorum describe --replication` lists it
 * as an observer), following the leader the responses announce
 * (CurrentLeader, NodeEndpoints), truncating on a DivergingEpoch, and handing
 * every record, control records too, to the record hook.
 *
 * Invariants:
 *   1. At most one Fetch in flight; the next goes out when it is answered
 *      (the leader holds it up to max wait), or after a backoff on failure.
 *   2. pos.next_offset only moves forward except on a DivergingEpoch from
 *      the leader; records are delivered in offset order, each once per
 *      position (after a truncation the hook sees the new history).
 *   3. caught_up becomes true once next_offset reached the high watermark
 *      of a response, and stays true.
 * Ownership: kb_meta_fetch_new borrows loop and quorum (they outlive it).
 * Threading: the loop's thread only.
 * Errors: a malformed response or batch closes the connection and retries;
 * INCONSISTENT_CLUSTER_ID calls the fatal hook.
 */
#ifndef KB_META_FETCH_H
#define KB_META_FETCH_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_loop.h"
#include "kb_meta_batches.h"
#include "kb_quorum.h"

typedef struct kb_meta_fetch kb_meta_fetch;

typedef struct kb_meta_fetch_opts {
    int32_t node_id;
    const char *cluster_id;
    kp_uuid directory_id; /* the metadata log dir's */
    kb_work *work;        /* resolves controller names (kb_ctrl_conn) */
    int32_t max_wait_ms;
    kb_meta_record_fn *on_record;
    void *arg;
    void (*on_fatal)(void *arg, kp_err err, const char *addr);
} kb_meta_fetch_opts;

kb_meta_fetch *kb_meta_fetch_new(kb_loop *loop, kb_quorum *q, const kb_meta_fetch_opts *o);
void kb_meta_fetch_start(kb_meta_fetch *f);
void kb_meta_fetch_free(kb_meta_fetch *f);

/* The offset after the last record delivered. */
int64_t kb_meta_fetch_next_offset(const kb_meta_fetch *f);
int64_t kb_meta_fetch_high_watermark(const kb_meta_fetch *f);
bool kb_meta_fetch_caught_up(const kb_meta_fetch *f);
int64_t kb_meta_fetch_records(const kb_meta_fetch *f);

#endif
