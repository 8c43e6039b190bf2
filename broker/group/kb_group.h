/*
 * kb_group: the classic consumer-group state machine (Kafka's "classic"
 * protocol: JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and the registry of
 * groups.
 *
 * Job: decide, for each group event (a join, a sync, a heartbeat, a leave,
 * the clock passing a deadline), the next state and the answers Kafka gives,
 * with Kafka's error codes. It never touches sockets, timers or disks: time
 * comes in as an argument, answers to waiting requests go out through the
 * env callbacks, deadlines are read back with kb_group_next_deadline(), and
 * persistence is asked for through env->store. That makes it a pure state
 * machine a test drives with a fake clock.
 *
 * States (Kafka's): EMPTY -> PREPARING_REBALANCE -> COMPLETING_REBALANCE ->
 * STABLE, back to PREPARING_REBALANCE on any membership or metadata change,
 * to EMPTY when the last member goes, DEAD once deleted.
 *
 * Invariants:
 *   1. EMPTY and DEAD groups have no members; the others have at least one
 *      and a leader who is a member.
 *   2. A member id appears at most once, as a member or as a pending member
 *      (v4+ MEMBER_ID_REQUIRED), never both; an instance id maps to at most
 *      one member.
 *   3. Every waiter handed to kb_group_join/kb_group_sync is answered exactly
 *      once through env->join_done/sync_done, unless kb_group_forget_waiter
 *      drops it first.
 *   4. A group's bytes (metadata and assignments it keeps) stay at or below
 *      KB_GROUP_MAX_BYTES, its members at or below env.max_size.
 *   5. generation only grows; it is 0 for a group that never rebalanced.
 *
 * Ownership: the registry owns its groups, a group its members; every
 * string and byte array is copied in (requests are borrowed only during a
 * call). Pointers to groups stay valid until kb_groups_remove/kb_groups_free;
 * pointers to members until the next event on their group. Callbacks may
 * read the group but must not call back into this module.
 *
 * Threading: loop thread only.
 *
 * Errors: Kafka codes (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
 * REBALANCE_IN_PROGRESS, INCONSISTENT_GROUP_PROTOCOL, INVALID_SESSION_TIMEOUT,
 * MEMBER_ID_REQUIRED, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
 * COORDINATOR_NOT_AVAILABLE, INVALID_GROUP_ID, INVALID_REQUEST) and
 * KP_ERR__NOMEM.
 */
#ifndef KB_GROUP_H
#define KB_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_loop.h"
#include "kb_offsets.h"
#include "kp_msg.h"
#include "kp_types.h"

/* Bounds on what a client can make a group keep. */
#define KB_GROUP_MAX_PROTOCOLS    64
#define KB_GROUP_MAX_MEMBER_BYTES (1 << 20) /* one member's metadata, or assignment */
#define KB_GROUP_MAX_BYTES        (64 << 20)
#define KB_GROUP_ID_MAX           1024      /* bytes of ids kept (group, member, instance) */
#define KB_GROUP_NO_DEADLINE      INT64_MAX

typedef enum kb_group_state {
    KB_GS_EMPTY,
    KB_GS_PREPARING_REBALANCE,
    KB_GS_COMPLETING_REBALANCE,
    KB_GS_STABLE,
    KB_GS_DEAD,
} kb_group_state;

typedef struct kb_group_proto {
    char *name;
    uint8_t *meta;
    int32_t meta_len;
} kb_group_proto;

typedef struct kb_group_member {
    char *member_id;
    char *instance_id; /* NULL: a dynamic member */
    char *client_id;
    char *client_host;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    kb_group_proto *protos; /* in the member's order of preference */
    int32_t nprotos;
    uint8_t *assignment;
    int32_t assignment_len;
    int64_t session_deadline; /* not enforced while awaiting join or sync */
    bool awaiting_join;       /* its JoinGroup is parked (waiter may be gone) */
    bool awaiting_sync;
    bool pending_sync;        /* joined this generation, has not synced yet */
    bool is_new;
    void *join_waiter;
    void *sync_waiter;
    int16_t join_version;     /* of the parked JoinGroup */
} kb_group_member;

typedef struct kb_group_pending {
    char *member_id;
    int64_t deadline;
} kb_group_pending;

typedef struct kb_group {
    char *id;
    kb_group_state state;
    kb_group_state prev_state;
    int32_t generation;
    char *protocol_type; /* NULL until a member joined (simple groups stay so) */
    char *protocol_name; /* NULL unless a generation with members is current */
    char *leader_id;     /* NULL when there are no members */
    kb_group_member **members; /* in join order */
    int32_t nmembers;
    int32_t members_cap;
    kb_group_pending *pending;
    int32_t npending;
    int32_t pending_cap;
    int64_t join_deadline;      /* end of the join phase (or of a delay step) */
    int32_t initial_delay_cur;  /* initial rebalance: the current delay step */
    int32_t initial_delay_left; /* initial rebalance: ms still allowed */
    bool initial_rebalance;
    bool new_member_added;
    int64_t sync_deadline;      /* pending-sync expiry */
    int64_t state_timestamp;    /* wall clock ms of the last state change */
    size_t bytes;               /* accounted against KB_GROUP_MAX_BYTES */
    kb_offset_map offsets;      /* committed offsets (kb_offsets) */
    kb_timer timer;             /* the coordinator's, armed at the next deadline */
    void *host;                 /* the coordinator's back pointer */
    bool persisted;             /* a GroupMetadata record exists in the log */
    struct kb_consumer_group *cg;       /* non-NULL: a KIP-848 consumer group (kb_consumer_group) */
    struct kb_share_group *sg;          /* non-NULL: a KIP-932 share group (kb_share_group) */
    struct kb_streams_group *stg;       /* non-NULL: a KIP-1071 streams group (kb_streams_group) */
} kb_group;

/* The answer to a JoinGroup. Strings borrow from the group during the call. */
typedef struct kb_group_join_result {
    kp_err err;
    const char *member_id;
    int32_t generation;
    const char *protocol_type;
    const char *protocol_name;
    const char *leader;
    bool skip_assignment;
    bool with_members; /* the leader: list g's members with metadata */
} kb_group_join_result;

typedef struct kb_groups kb_groups;

typedef struct kb_group_env {
    /* Answers a parked (or immediate) JoinGroup/SyncGroup. */
    void (*join_done)(void *waiter, const kb_group *g, const kb_group_join_result *res, void *ctx);
    void (*sync_done)(void *waiter, const kb_group *g, kp_err err, kp_slice assignment,
                      void *ctx);
    /* Persists the group's metadata (a GroupMetadata record); an error
     * fails the SyncGroup it belongs to. May be NULL. */
    kp_err (*store)(kb_group *g, void *ctx);
    /* Fills out with a fresh random UUID string (36 chars + NUL). */
    void (*uuid)(char out[37], void *ctx);
    int64_t (*wall_ms)(void *ctx);
    void *ctx;
    int32_t initial_rebalance_delay_ms;
    int32_t min_session_timeout_ms;
    int32_t max_session_timeout_ms;
    int32_t max_size;
} kb_group_env;

/* What a JoinGroup needs beyond its body. */
typedef struct kb_group_client {
    kp_str client_id;
    kp_str client_host;
    int16_t version;
} kb_group_client;

/* ---- registry ----------------------------------------------------------- */

kb_groups *kb_groups_new(const kb_group_env *env);
void kb_groups_free(kb_groups *gs);
const kb_group_env *kb_groups_env(const kb_groups *gs);
kb_group *kb_groups_find(const kb_groups *gs, kp_str id);
/* Finds or creates (EMPTY, generation 0) the group id. */
kp_err kb_groups_get(kb_groups *gs, kp_str id, kb_group **out);
/* Marks the group DEAD and frees it (only EMPTY or DEAD groups). */
void kb_groups_remove(kb_groups *gs, kb_group *g);
/* The same for a group whose coordinator moved away: every parked
 * JoinGroup and SyncGroup of it is answered err first (NOT_COORDINATOR). */
void kb_groups_unload(kb_groups *gs, kb_group *g, kp_err err);
size_t kb_groups_count(const kb_groups *gs);
/* Iterates: *cursor = 0 first; NULL after the last group. */
kb_group *kb_groups_next(const kb_groups *gs, size_t *cursor);

/* ---- events ------------------------------------------------------------- */

/* A JoinGroup; the answer comes through env->join_done, during this call or
 * later. rq->group_id must already be checked non-empty. */
kp_err kb_group_join(kb_groups *gs, const kp_join_group_req *rq, const kb_group_client *cl,
                     void *waiter, int64_t now);
/* A SyncGroup; the answer comes through env->sync_done. */
kp_err kb_group_sync(kb_groups *gs, const kp_sync_group_req *rq, void *waiter, int64_t now);
kp_err kb_group_heartbeat(kb_groups *gs, const kp_heartbeat_req *rq, int64_t now);
/* One member of a LeaveGroup (member_id may be "" with an instance id). */
kp_err kb_group_leave(kb_groups *gs, kb_group *g, kp_str member_id, kp_str instance_id,
                      int64_t now);
/* The checks OffsetCommit makes of a member and generation. */
kp_err kb_group_check_commit(const kb_group *g, kp_str member_id, kp_str instance_id,
                             int32_t generation);
/* Runs every deadline that passed (session expiry, join and sync phases). */
void kb_group_tick(kb_groups *gs, kb_group *g, int64_t now);
/* The earliest deadline, or KB_GROUP_NO_DEADLINE. */
int64_t kb_group_next_deadline(const kb_group *g);
/* Drops a waiter whose request went away (its connection closed). */
void kb_group_forget_waiter(kb_group *g, void *waiter);

/* ---- queries ------------------------------------------------------------ */

const char *kb_group_state_name(kb_group_state s);
kb_group_member *kb_group_member_find(const kb_group *g, kp_str member_id);
/* The member's metadata for protocol name (empty when it has none). */
kp_slice kb_group_member_metadata(const kb_group_member *m, const char *protocol);
/* True when a member of a "consumer" group subscribes to topic (or when the
 * subscriptions cannot be read, as Kafka assumes). */
bool kb_group_subscribed_to(const kb_group *g, kp_str topic);
/* Fills a GroupMetadataValue (strings borrowed from g; arrays in a). */
kp_err kb_group_to_record(const kb_group *g, kp_arena *a, kp_group_metadata_value *out);
/* Rebuilds g (EMPTY, no members) from a loaded record: STABLE with its
 * members, or EMPTY; session deadlines start at now. */
kp_err kb_group_from_record(kb_group *g, const kp_group_metadata_value *v, int64_t now);

#endif
