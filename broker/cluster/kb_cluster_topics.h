/*
 * kb_cluster_topics: topics a broker in cluster mode asks the controller to
 * create by itself, as Kafka 4.4's AutoTopicCreationManager does, instead
 * of creating them locally: the group and transaction coordinators'
 * internal topics when FindCoordinator (or a group API) needs them, and a
 * topic a Metadata request auto-creates (auto.create.topics.enable).
 *
 *   __consumer_offsets   offsets.topic.num.partitions, offsets.topic.
 *                        replication.factor (not capped: a controller with
 *                        fewer brokers answers INVALID_REPLICATION_FACTOR),
 *                        cleanup.policy=compact, compression.type=producer,
 *                        segment.bytes=104857600
 *   __transaction_state  transaction.state.log.num.partitions, .replication.
 *                        factor, min.insync.replicas=transaction.state.log.
 *                        min.isr, cleanup.policy=compact, compression.type=
 *                        uncompressed, unclean.leader.election.enable=false,
 *                        segment.bytes=104857600
 *   any other            num.partitions, default.replication.factor, sent
 *                        in an Envelope with the Metadata client's principal
 *
 * Meanwhile the client is answered COORDINATOR_NOT_AVAILABLE or
 * UNKNOWN_TOPIC_OR_PARTITION and asks again; the topic reaches the broker
 * as metadata records (the metadata image).
 * Invariants: outside cluster mode nothing here acts (false / no-op).
 * Threading: the loop's thread only.
 */
#ifndef KB_CLUSTER_TOPICS_H
#define KB_CLUSTER_TOPICS_H

#include <stdbool.h>

#include "kb_context.h"
#include "kp_types.h"

/* In cluster mode, when the internal topic name is not served here yet:
 * asks the controller for it and returns true (answer
 * COORDINATOR_NOT_AVAILABLE). False otherwise. */
bool kb_cluster_topics_internal_pending(kb_broker *b, const char *name);

/* In cluster mode: asks the controller to create name for the Metadata
 * request req and returns true (answer UNKNOWN_TOPIC_OR_PARTITION). */
bool kb_cluster_topics_auto_create(kb_broker *b, kp_str name, const kb_req *req);

#endif
