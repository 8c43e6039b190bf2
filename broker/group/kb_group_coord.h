/*
 * kb_group_coord: the group coordinator of this broker: the kb_group state
 * machines wired to the event loop, and their persistence in
 * __consumer_offsets.
 *
 * Job: own the group registry; arm each group's timer at its next deadline;
 * write offset commits, group metadata and tombstones as records (kb_offsets
 * formats) to the group's partition of __consumer_offsets before anything is
 * acknowledged; rebuild every group from that topic at start-up (in cluster
 * mode: the groups of a partition when this broker becomes its leader, and
 * drop them when it stops being it, kb_group_coord_parts); expire the
 * offsets of empty groups after offsets.retention.minutes; drop every
 * group's offsets of a deleted topic.
 *
 * Invariants:
 *   1. A group's in-memory offsets and metadata change only after the
 *      records saying so were appended (page-cache durable) to its partition
 *      kafka-style: partition = kb_offsets_partition_for(group id). The
 *      exception: a KIP-848 group's records (kb_consumer_group_rec: epochs,
 *      members, target and current assignments) are written by
 *      kb_group_coord_touch right after the event that changed them; a failed
 *      write is retried after the next event, and a crash in between loses
 *      that last change only (the members' heartbeats redo it).
 *   2. A group's timer is armed exactly when kb_group_next_deadline() is
 *      finite, at that deadline (kb_group_coord_touch after every event).
 *   3. __consumer_offsets exists once any group state was written, with
 *      offsets.topic.num.partitions partitions and cleanup.policy=compact.
 *   4. Offsets committed in a transaction are in the log as a transactional
 *      batch but reach a group's map only once the commit marker follows
 *      (at runtime kb_group_coord_txn_end, at start-up the marker in the log).
 *   5. Cluster mode: the registry holds only groups of partitions this
 *      broker leads and has loaded or is loading; requests reach a group
 *      only once its partition is loaded (kb_cv_check_coordinator).
 *
 * Ownership: the coordinator (b->group_coord) owns the registry; kb_group_coord_stop
 * frees it after the server stopped (parked requests are gone by then).
 *
 * Threading: loop thread only.
 *
 * Errors: KP_ERR__NOMEM; storage errors from the appends (callers answer
 * COORDINATOR_NOT_AVAILABLE); start-up returns KP_ERR__IO with a message
 * when __consumer_offsets cannot be read.
 */
#ifndef KB_GROUP_COORD_H
#define KB_GROUP_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_group.h"
#include "kb_topics.h"

struct kb_share_group_env;
struct kb_share_limits;

#define KB_GROUP_COORD_OFFSETS_TOPIC "__consumer_offsets"

/* What a handler hands kb_group_join/kb_group_sync as the waiter: the
 * coordinator's env forwards the answer to these. */
typedef struct kb_gwaiter kb_gwaiter;
struct kb_gwaiter {
    void (*join_done)(kb_gwaiter *w, const kb_group *g, const kb_group_join_result *res);
    void (*sync_done)(kb_gwaiter *w, const kb_group *g, kp_err err, kp_slice assignment);
};

kp_err kb_group_coord_start(kb_broker *b, char *err, size_t errlen);
void kb_group_coord_stop(kb_broker *b);

kb_groups *kb_group_coord_groups(kb_broker *b);

/* Cluster mode: the partitions of __consumer_offsets this broker leads, as
 * the image moves them (kb_coord_load.h: a partition's groups load, in
 * bounded steps, when it is elected here, and are dropped when it leaves);
 * NULL on a single node, where every group is loaded at start-up. */
struct kb_coord_parts *kb_group_coord_parts(kb_broker *b);
/* The lag of every group (kb_lag.h). */
struct kb_lag *kb_group_coord_lag(kb_broker *b);
/* The KIP-848 consumer groups' view of topics and their settings. */
const struct kb_consumer_group_env *kb_group_coord_cgroup_env(kb_broker *b);
/* The same for group g: its session timeout and heartbeat interval from its
 * group configs (kb_group_conf.h) where set. */
void kb_group_coord_cgroup_env_for(kb_broker *b, const kb_group *g, struct kb_consumer_group_env *out);
/* A share group's settings (kb_share_group.h) and its share-partitions'
 * limits (kb_share_partition.h): its group configs where set, else the
 * broker's group.share.* values. */
void kb_group_coord_share_env_for(kb_broker *b, const kb_group *g, struct kb_share_group_env *out);
void kb_group_coord_share_limits_for(kb_broker *b, const kb_group *g, struct kb_share_limits *out);
int64_t kb_group_coord_now(kb_broker *b);  /* monotonic ms */
int64_t kb_group_coord_wall(kb_broker *b); /* wall clock ms */

/* __consumer_offsets, created on first use. */
kp_err kb_group_coord_offsets_topic(kb_broker *b, kb_topic **out);

/* Re-arms g's timer after an event changed its deadlines (and records a
 * consumer group's new epoch). */
void kb_group_coord_touch(kb_broker *b, kb_group *g);

/* The group a heartbeat of a KIP-848-style protocol (consumer, share,
 * streams: kind) goes to, as Kafka finds it: one already of that kind
 * (is_kind), else an empty group taken over (with typeless, only one that
 * never had a protocol type), else a new one for a join (*created). Any
 * other group, or a missing one for a non-join, is GROUP_ID_NOT_FOUND with
 * Kafka's message in *msg (from arena a). A group taken over or made gets
 * its state machine from make (false: out of memory, KP_ERR__NOMEM, and a
 * group made here is removed again). */
typedef struct kb_group_kind {
    const char *name; /* "consumer", "share", "streams" */
    bool typeless;
    bool (*is)(const kb_group *g);
    bool (*make)(kb_group *g);
} kb_group_kind;

/* After a heartbeat: a group this request made that holds nothing
 * (nmembers, no offsets) goes again; any other is touched (stored, its
 * timer armed). */
void kb_group_coord_heartbeat_done(kb_broker *b, kb_group *g, bool created, int32_t nmembers);

kp_err kb_group_coord_heartbeat_group(kb_broker *b, kp_str id, bool join, const kb_group_kind *k,
                                      kp_arena *a, kb_group **out, bool *created,
                                      const char **msg);

/* Writes the commits then applies them to g->offsets. */
kp_err kb_group_coord_commit(kb_broker *b, kb_group *g, const kb_offset *offs, int32_t n);
/* Writes tombstones for the given offsets of g, then forgets them. */
kp_err kb_group_coord_delete_offsets(kb_broker *b, kb_group *g, const kb_offset *offs, int32_t n);
/* Writes tombstones for every offset and the metadata of an EMPTY group,
 * then removes it. */
kp_err kb_group_coord_delete_group(kb_broker *b, kb_group *g);

/* A topic was deleted: every group's offsets of it, committed or held in an
 * open transaction, get tombstones and go, as Kafka's coordinator does on
 * deleted partitions (the groups stay; failures are logged). */
void kb_group_coord_topic_deleted(kb_broker *b, kp_str topic);

/* TxnOffsetCommit: writes the commits as one transactional batch of
 * (pid, epoch) to g's partition and holds them, invisible to OffsetFetch,
 * until pid's marker lands on that partition (at most 100000 held in all:
 * beyond, COORDINATOR_NOT_AVAILABLE). */
kp_err kb_group_coord_txn_commit(kb_broker *b, kb_group *g, int64_t pid, int16_t epoch,
                            const kb_offset *offs, int32_t n);
/* pid's commit or abort marker was written to partition of
 * __consumer_offsets: its held offsets there become committed, or vanish. */
void kb_group_coord_txn_end(kb_broker *b, int64_t pid, int32_t partition, bool commit);
/* Whether an open transaction holds an offset for (group, topic, partition)
 * (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT). */
bool kb_group_coord_txn_pending(kb_broker *b, kp_str group, kp_str topic, int32_t partition);

#endif
