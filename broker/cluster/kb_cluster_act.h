/*
 * kb_cluster_act: the metadata image acted on by this broker (cluster
 * mode): a topic with a partition whose replicas include node.id is
 * created in the local topic registry with the controller's topic id,
 * partition count and configs (its directories made on the helper threads
 * by kb_partition_dirs; its partition logs open on first use, as every
 * log does); RemoveTopicRecord deletes this broker's copy; a topic
 * ConfigRecord replaces the local topic's configs; leader epochs, the
 * replication state (kb_replica: leader, ISR) and the replica fetchers
 * (kb_replica_fetch, for partitions another broker leads) follow the image.
 *
 * runnel-topics.properties in cluster mode: a cache of what is on disk
 * (name, the controller's id, partition count, configs), never a source
 * of truth; the image decides, and a local topic of the same name with
 * another id is left alone with one WARN line.
 *
 * Invariants:
 *   1. Nothing here blocks the loop on directory work: creation and
 *      deletion run on the helper threads.
 *   2. Changes are gathered per topic while records are applied and acted
 *      on from a 0 ms timer, so a topic and its partitions (one batch of
 *      the metadata log) are created at once, with every partition known.
 *   3. A topic already being created or deleted locally is not started
 *      again; the next change of it retries.
 * Ownership: kb_cluster_act_new allocates; kb_cluster_act_free frees;
 * borrows the broker and the image (which must outlive it).
 * Threading: the loop's thread only.
 * Errors: logged (WARN/ERROR lines); the image stays the truth and the
 * next change of that topic tries again.
 */
#ifndef KB_CLUSTER_ACT_H
#define KB_CLUSTER_ACT_H

#include "kb_context.h"
#include "kb_meta_image.h"
#include "kb_replica.h"

typedef struct kb_cluster_act kb_cluster_act;

/* Starts listening to img; NULL when out of memory. */
kb_cluster_act *kb_cluster_act_new(kb_broker *b, kb_meta_image *img, int32_t node_id);
void kb_cluster_act_free(kb_cluster_act *a);
/* Who the leader's replicas tell when a follower may join the ISR (and
 * who proposes ISR changes): set before the image brings partitions. */
void kb_cluster_act_set_isr(kb_cluster_act *a, kb_replica_isr_fn *fn, void *arg);
/* Whether partition p of t has node among its replicas. */
bool kb_cluster_act_hosts(const kb_mi_topic *t, int32_t p, int32_t node);

#endif
