/*
 * kb_replica_fetch: this broker's replica fetchers: for every partition it
 * hosts but does not lead, Kafka's Fetch (v18) to the leader's
 * inter-broker endpoint with ReplicaState {node.id, broker epoch}, all the
 * partitions it follows from one leader in one long-polled request
 * (replica.fetch.wait.max.ms, .min.bytes, .max.bytes, .response.max.bytes),
 * the leader's batches appended as they are (kb_partition_log_append_replica)
 * and the high watermark taken from each response.
 *
 * Invariants:
 *   1. One connection and at most one Fetch in flight per leader broker;
 *      the next goes out when it is answered, or replica.fetch.backoff.ms
 *      after a failure (no connection, a malformed answer, an error).
 *   2. A partition is fetched from the leader the image names at the epoch
 *      the image names; a leader change moves it to that leader's fetcher
 *      and a partition no longer followed is never appended to again
 *      (responses are matched against what was asked, by topic id and
 *      partition; an answer for anything else fails the connection).
 *   3. Nothing blocks the loop: connections are kb_ctrl_conn's.
 * Ownership: kb_replica_fetch_new borrows the broker and the image (both
 * outlive it).
 * Threading: the loop's thread only.
 * Errors: logged and retried (invariant 1).
 */
#ifndef KB_REPLICA_FETCH_H
#define KB_REPLICA_FETCH_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_meta_image.h"
#include "kb_topics.h"

typedef struct kb_replica_fetch kb_replica_fetch;

kb_replica_fetch *kb_replica_fetch_new(kb_broker *b, const kb_meta_image *img);
void kb_replica_fetch_free(kb_replica_fetch *rf);
/* Partition p of t follows leader at leader_epoch; a leader of -1 or this
 * broker stops following it. */
void kb_replica_fetch_follow(kb_replica_fetch *rf, const kb_topic *t, int32_t p, int32_t leader,
                             int32_t leader_epoch);
/* Stops following every partition of the topic of that id. */
void kb_replica_fetch_forget_topic(kb_replica_fetch *rf, const kp_uuid *id);

#endif
