/*
 * kb_streams_group: streams groups of KIP-1071 (Kafka Streams with
 * group.protocol=streams, StreamsGroupHeartbeat): members, the group's
 * topology (kb_streams_topology), the broker-side task assignment and the
 * reconciliation of each member towards its target tasks.
 *
 * Job: for each heartbeat (or the clock passing a deadline) decide the
 * member's next epoch, its tasks and statuses, and the error Kafka gives.
 * The group epoch grows on every change of membership, of a member's
 * process or endpoint, of the topology, or of the topics the topology
 * reads; the target assignment is then recomputed (kb_streams_assign),
 * but for the group's first one, which waits env.initial_delay_ms (as
 * Kafka's group.streams.initial.rebalance.delay.ms) with empty targets and
 * the ASSIGNMENT_DELAYED status, then comes with a new group epoch.
 * Reconciliation works as KIP-848's (and reuses its sets and epoch check,
 * kb_consumer_partitions): a member first gives up the active tasks it
 * must revoke (its epoch held), and an active task goes to a new owner only
 * once no other member holds it or is revoking it. Standby tasks follow the
 * target at once. Warm-up tasks are never assigned.
 *
 * A task is (subtopology index, partition), kept in a kb_cg_set as a
 * kb_cg_tp whose "topic id" carries the index (kb_st_task_id).
 *
 * Invariants:
 *   1. No active task is in two members' (active + revoking) sets at once.
 *   2. assignment_epoch <= group_epoch, equal after a heartbeat or tick.
 *   3. A member's epoch is at most assignment_epoch.
 *   4. Members <= min(env.max_size, KB_STREAMS_GROUP_MAX_MEMBERS); tasks in
 *      a request <= KB_STREAMS_GROUP_MAX_TASKS (INVALID_REQUEST beyond).
 *
 * Ownership: the group owns its members, topology and every string; the
 * request is borrowed during a call; pointers in a result live until the
 * next event on the group. Threading: loop thread only.
 *
 * Errors: INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
 * STREAMS_INVALID_TOPOLOGY, GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID,
 * UNRELEASED_INSTANCE_ID, and KP_ERR__NOMEM.
 */
#ifndef KB_STREAMS_GROUP_H
#define KB_STREAMS_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_consumer_group.h"
#include "kb_consumer_partitions.h"
#include "kb_streams_topology.h"
#include "kp_msg.h"
#include "kp_types.h"

#define KB_STREAMS_GROUP_MAX_MEMBERS 10000
#define KB_STREAMS_GROUP_MAX_TASKS   200000
#define KB_STREAMS_GROUP_NO_DEADLINE INT64_MAX
#define KB_STREAMS_GROUP_LEAVE_EPOCH (-1)
#define KB_STREAMS_GROUP_STATIC_LEAVE_EPOCH (-2)
#define KB_STREAMS_GROUP_ASSIGNOR "sticky"

typedef enum kb_streams_group_state {
    KB_STGS_EMPTY,
    KB_STGS_NOT_READY,
    KB_STGS_ASSIGNING,
    KB_STGS_RECONCILING,
    KB_STGS_STABLE,
} kb_streams_group_state;

typedef struct kb_st_member {
    char *member_id;
    char *instance_id;
    char *rack_id;
    char *client_id;
    char *client_host;
    char *process_id;
    char *endpoint_host; /* NULL: no user endpoint */
    uint16_t endpoint_port;
    int32_t topology_epoch;
    int32_t rebalance_timeout_ms;
    int32_t epoch;
    int32_t prev_epoch;
    kb_cg_member_state state;
    kb_cg_set active;
    kb_cg_set revoking; /* active tasks being given up */
    kb_cg_set standby;
    kb_cg_set target_active;
    kb_cg_set target_standby;
    int64_t session_deadline;
    int64_t revoke_deadline;
} kb_st_member;

typedef struct kb_streams_group_env {
    const kb_consumer_group_env *topics; /* topic_by_name */
    kb_st_create_fn create_topic;        /* NULL: internal topics are not made */
    void *create_ctx;
    int32_t heartbeat_interval_ms;
    int32_t session_timeout_ms;
    int32_t num_standby;
    int32_t max_size;
    int32_t initial_delay_ms; /* group.streams.initial.rebalance.delay.ms */
} kb_streams_group_env;

typedef struct kb_streams_group {
    int32_t group_epoch;
    int32_t assignment_epoch;
    kb_streams_topology *topology; /* NULL until a member joined with one */
    kb_st_member **members;        /* in join order */
    int32_t nmembers;
    int32_t members_cap;
    uint64_t meta_sig;
    int64_t meta_deadline;
    bool dirty;
    bool shutdown; /* a member asked the application to shut down */
    bool delay_started; /* the initial rebalance delay ran (once a group) */
    int64_t delay_until; /* its end while it runs, else 0 */
} kb_streams_group;

typedef struct kb_streams_group_result {
    kp_err err;
    const char *message;
    const char *member_id;
    int32_t epoch;
    bool with_tasks;
    const kb_st_member *member; /* its tasks, when with_tasks */
    bool stale_topology;
    bool delayed; /* the initial rebalance delay holds the assignment back */
} kb_streams_group_result;

typedef struct kb_streams_group_client {
    kp_str client_id;
    kp_str client_host;
} kb_streams_group_client;

kb_streams_group *kb_streams_group_new(void);
void kb_streams_group_free(kb_streams_group *sg);

/* Kafka's checks of a StreamsGroupHeartbeat before it looks at the group. */
kp_err kb_streams_group_check_request(const kp_streams_group_heartbeat_req *rq,
                                      const char **message);
kp_err kb_streams_group_heartbeat(kb_streams_group *sg, const kb_streams_group_env *env,
                                  const kp_streams_group_heartbeat_req *rq,
                                  const kb_streams_group_client *cl, int64_t now,
                                  kb_streams_group_result *res);
void kb_streams_group_tick(kb_streams_group *sg, const kb_streams_group_env *env, int64_t now);
int64_t kb_streams_group_next_deadline(const kb_streams_group *sg);

kb_streams_group_state kb_streams_group_state_of(const kb_streams_group *sg);
const char *kb_streams_group_state_name(kb_streams_group_state s);
kb_st_member *kb_streams_group_member_find(const kb_streams_group *sg, kp_str member_id);

/* OffsetCommit and OffsetFetch checks, as for consumer groups. */
kp_err kb_streams_group_check_commit(const kb_streams_group *sg, kp_str member_id, int32_t epoch);
kp_err kb_streams_group_check_fetch(const kb_streams_group *sg, kp_str member_id, int32_t epoch);

/* The task (sub, partition) as a set element, and back. */
kp_uuid kb_st_task_id(int32_t sub);
int32_t kb_st_task_sub(const kb_cg_tp *tp);

/* ---- the assignor (kb_streams_assign) ------------------------------------ */

/* Recomputes every member's target tasks: active tasks balanced over the
 * members (each within one of the others), sticky to their previous
 * target owner; then num_standby standby copies of each task on members of
 * other processes than its active owner's and than each other's. */
kp_err kb_streams_assign(kb_st_member **members, int32_t n, const kb_streams_topology *t,
                         int32_t num_standby);

#endif
