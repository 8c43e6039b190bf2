/*
 * kb_share_group: share groups of KIP-932 (KafkaShareConsumer,
 * ShareGroupHeartbeat): members, their subscriptions and the "simple"
 * server assignor, as Kafka 4.4's group coordinator keeps them.
 *
 * Job: for each heartbeat (or the clock passing a session deadline) decide
 * the member's epoch and assignment and the error Kafka gives. The group
 * epoch grows on every change of membership, subscriptions or subscribed
 * topic metadata; the target assignment is recomputed when the group epoch
 * passed the assignment epoch. There is no revocation step: several members
 * may read one partition at once (the share-partition's locks keep their
 * records apart), so a member takes its target, and the target's epoch, at
 * its next heartbeat. It never touches sockets, timers or disks: time comes
 * in as an argument and topics are seen through an env callback.
 *
 * The simple assignor: the subscribed partitions (sorted by topic id and
 * partition) are handed out in ceil(members / partitions) rounds of
 * "slots", slot k going to member k % members (in join order), so every
 * partition has members and the counts per member differ by at most one;
 * with more members than partitions each partition is shared by
 * ceil(members / partitions) or fewer of them. Mixed subscriptions do the
 * same per topic over the members subscribed to it, starting where the
 * previous topic stopped. Kafka's assignor also keeps what a member had
 * (sticky); this one recomputes from scratch.
 *
 * Invariants:
 *   1. assignment_epoch <= group_epoch; equal after every heartbeat or tick.
 *   2. A member's epoch is at most assignment_epoch.
 *   3. A member id appears once; members <= env.max_size and
 *      KB_SHARE_GROUP_MAX_MEMBERS; a subscription holds at most
 *      KB_SHARE_GROUP_MAX_TOPICS names of at most 249 bytes.
 *   4. Every set is sorted by (topic id, partition), no repeats.
 *
 * Ownership: a kb_share_group owns its members and every string and set in
 * them; requests are borrowed during a call. Pointers in a result stay
 * valid until the next event on the group.
 *
 * Threading: loop thread only.
 *
 * Errors: Kafka codes (INVALID_REQUEST, UNKNOWN_MEMBER_ID,
 * FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED) and KP_ERR__NOMEM.
 */
#ifndef KB_SHARE_GROUP_H
#define KB_SHARE_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_consumer_group.h"
#include "kb_consumer_partitions.h"
#include "kp_msg.h"
#include "kp_types.h"

#define KB_SHARE_GROUP_MAX_MEMBERS  10000
#define KB_SHARE_GROUP_MAX_TOPICS   10000
#define KB_SHARE_GROUP_NO_DEADLINE  INT64_MAX
#define KB_SHARE_GROUP_LEAVE_EPOCH  (-1)
#define KB_SHARE_GROUP_ASSIGNOR     "simple"

typedef enum kb_share_group_state {
    KB_SGS_EMPTY,
    KB_SGS_STABLE,
} kb_share_group_state;

typedef struct kb_sg_member {
    char *member_id;
    char *rack_id;
    char *client_id;
    char *client_host;
    char **topics; /* subscribed names, sorted, unique */
    int32_t ntopics;
    int32_t epoch;
    kb_cg_set assigned; /* what the member was last told */
    kb_cg_set target;   /* its share of the target assignment */
    int64_t session_deadline;
} kb_sg_member;

/* The settings a group works under (the broker's, or the group's configs). */
typedef struct kb_share_group_env {
    bool (*topic_by_name)(void *ctx, const char *name, kb_cg_topic *out);
    void *ctx;
    int32_t heartbeat_interval_ms;
    int32_t session_timeout_ms;
    int32_t max_size;
} kb_share_group_env;

struct kb_share_parts; /* kb_share_partition.h: the group's share-partitions */

typedef struct kb_share_group {
    int32_t group_epoch;
    int32_t assignment_epoch;
    kb_sg_member **members; /* in join order */
    int32_t nmembers;
    int32_t members_cap;
    uint64_t meta_sig; /* subscribed topics (names, ids, partitions) at group_epoch */
    struct kb_share_parts *parts; /* owned; NULL until a ShareFetch made one */
} kb_share_group;

/* The answer to a heartbeat. Pointers borrow from the group. */
typedef struct kb_share_group_result {
    kp_err err;
    const char *message; /* NULL: none */
    int32_t epoch;
    int32_t heartbeat_interval_ms;
    bool with_assignment;
    const kb_cg_set *assignment;
} kb_share_group_result;

typedef struct kb_share_group_client {
    kp_str client_id;
    kp_str client_host;
} kb_share_group_client;

kb_share_group *kb_share_group_new(void);
/* Frees the group, its members and (through free_parts, may be NULL) its
 * share-partitions. */
void kb_share_group_free(kb_share_group *sg, void (*free_parts)(struct kb_share_parts *));

/* Kafka's checks of a ShareGroupHeartbeat before it looks at the group:
 * INVALID_REQUEST with a message. */
kp_err kb_share_group_check_request(const kp_share_group_heartbeat_req *rq, const char **message);
/* A ShareGroupHeartbeat (checked). res->err is the Kafka error; the return
 * value is KP_ERR__NOMEM or NONE. */
kp_err kb_share_group_heartbeat(kb_share_group *sg, const kb_share_group_env *env,
                                const kp_share_group_heartbeat_req *rq,
                                const kb_share_group_client *cl, int64_t now,
                                kb_share_group_result *res);
/* Removes members whose session passed. */
void kb_share_group_tick(kb_share_group *sg, const kb_share_group_env *env, int64_t now);
int64_t kb_share_group_next_deadline(const kb_share_group *sg);

kb_share_group_state kb_share_group_state_of(const kb_share_group *sg);
const char *kb_share_group_state_name(kb_share_group_state s);
kb_sg_member *kb_share_group_member_find(const kb_share_group *sg, kp_str member_id);
/* Whether any member subscribes to topic. */
bool kb_share_group_subscribed_to(const kb_share_group *sg, kp_str topic);

#endif
