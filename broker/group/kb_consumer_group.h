/*
 * kb_consumer_group: consumer groups of the KIP-848 protocol (group.protocol=consumer,
 * ConsumerGroupHeartbeat): members, their subscriptions, the server-side
 * assignors and the incremental reconciliation of each member towards its
 * target assignment.
 *
 * Job: for each heartbeat (or the clock passing a deadline) decide the
 * member's next epoch and assignment and the error Kafka gives, as Kafka's
 * group coordinator does: the group epoch grows on every change of
 * membership, subscriptions or subscribed topic metadata; the target
 * assignment is recomputed (assignor "uniform" or "range") when the group
 * epoch passed the assignment epoch; a member first revokes what it must
 * give up, and only then gets partitions another member still holds. It
 * never touches sockets, timers or disks: time comes in as an argument and
 * topics are seen through env callbacks, so a test drives it on a fake clock.
 *
 * Invariants:
 *   1. No partition is in two members' (assigned + revoking) sets at once.
 *   2. assignment_epoch <= group_epoch; after a heartbeat or a tick they are
 *      equal (the target is recomputed at once).
 *   3. A member's epoch is at most assignment_epoch; it reaches it only when
 *      the member holds nothing it must revoke.
 *   4. A member id appears once; an instance id maps to at most one member.
 *   5. Members <= min(env.max_size, KB_CONSUMER_GROUP_MAX_MEMBERS); a subscription
 *      holds <= KB_CONSUMER_GROUP_MAX_TOPICS names of <= KB_CONSUMER_GROUP_TOPIC_NAME_MAX bytes
 *      (INVALID_REQUEST beyond; Kafka has no such caps) and a regex <=
 *      KB_CONSUMER_GROUP_MAX_REGEX bytes that expand to <= KB_CONSUMER_GROUP_REGEX_EXPANSION
 *      through counted repetitions; owned partitions in a request <=
 *      KB_CONSUMER_GROUP_MAX_OWNED.
 *   6. Every set (kb_cg_set) is sorted by (topic id, partition), no repeats.
 *
 * Regular expressions: Kafka uses RE2/J; we use POSIX extended regexes
 * (regcomp REG_EXTENDED), matched against the whole topic name. The common
 * subset (literals, ., *, +, ?, [], (), |, {m,n}, anchors) behaves alike;
 * RE2-only syntax such as \d or (?i) is refused as INVALID_REGULAR_EXPRESSION
 * or matches differently. As in Kafka, which resolves a new regex in the
 * background after the heartbeat that brought it, that heartbeat's
 * assignment holds only the member's literal topics (unless another member
 * has the same regex resolved); the next event on the group resolves it and
 * bumps the group epoch.
 *
 * Ownership: a kb_consumer_group owns its members and every string and set in them;
 * requests are borrowed only during a call. Pointers in a result stay valid
 * until the next event on the group.
 *
 * Threading: loop thread only.
 *
 * Errors: Kafka codes (INVALID_REQUEST, UNKNOWN_MEMBER_ID,
 * FENCED_MEMBER_EPOCH, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
 * UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, GROUP_MAX_SIZE_REACHED,
 * STALE_MEMBER_EPOCH, UNSUPPORTED_VERSION) and KP_ERR__NOMEM.
 */
#ifndef KB_CONSUMER_GROUP_H
#define KB_CONSUMER_GROUP_H

#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "kb_consumer_partitions.h"
#include "kp_msg.h"
#include "kp_types.h"

#define KB_CONSUMER_GROUP_MAX_MEMBERS      10000
#define KB_CONSUMER_GROUP_MAX_TOPICS       10000
#define KB_CONSUMER_GROUP_MAX_REGEX        1024
#define KB_CONSUMER_GROUP_REGEX_EXPANSION  16384 /* regex bytes x repetition counts */
#define KB_CONSUMER_GROUP_TOPIC_NAME_MAX   249 /* a longer subscribed name is refused */
#define KB_CONSUMER_GROUP_MAX_OWNED        200000
#define KB_CONSUMER_GROUP_REFRESH_MS       1000 /* subscribed topic metadata re-read at most this often */
#define KB_CONSUMER_GROUP_NO_DEADLINE      INT64_MAX
#define KB_CONSUMER_GROUP_LEAVE_EPOCH      (-1)
#define KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH (-2)

typedef enum kb_consumer_group_state {
    KB_CGS_EMPTY,
    KB_CGS_ASSIGNING,
    KB_CGS_RECONCILING,
    KB_CGS_STABLE,
} kb_consumer_group_state;

typedef enum kb_cg_member_state {
    KB_CMS_STABLE,
    KB_CMS_UNREVOKED,   /* waits for the member to give partitions up */
    KB_CMS_UNRELEASED,  /* waits for other members to give partitions up */
} kb_cg_member_state;

/* Which of a member's records (kb_consumer_group_rec) no longer match it. */
#define KB_CG_DIRTY_META    1 /* ConsumerGroupMemberMetadata */
#define KB_CG_DIRTY_TARGET  2 /* ConsumerGroupTargetAssignmentMember */
#define KB_CG_DIRTY_CURRENT 4 /* ConsumerGroupCurrentMemberAssignment */

typedef struct kb_cg_member {
    char *member_id;
    char *instance_id; /* NULL: dynamic */
    char *rack_id;
    char *client_id;
    char *client_host;
    char **topics; /* subscribed names, sorted, unique */
    int32_t ntopics;
    char *regex;   /* NULL: none */
    regex_t re;
    char **rx_topics; /* the regex's matches at the last refresh, sorted */
    int32_t nrx_topics;
    bool rx_pending;  /* the regex is not resolved yet (rx_topics empty) */
    bool rx_fresh;    /* ... and came with the heartbeat being handled */
    char *assignor; /* server assignor asked for; NULL: the group's default */
    int32_t rebalance_timeout_ms;
    int32_t epoch;
    int32_t prev_epoch;
    kb_cg_member_state state;
    kb_cg_set assigned;
    kb_cg_set revoking;
    kb_cg_set target;
    int64_t session_deadline;
    int64_t revoke_deadline; /* KB_CONSUMER_GROUP_NO_DEADLINE unless UNREVOKED */
    unsigned dirty;          /* KB_CG_DIRTY_* */
} kb_cg_member;

/* A topic as the group sees it (name borrowed from the registry). */
typedef struct kb_cg_topic {
    const char *name;
    kp_uuid id;
    int32_t npartitions;
} kb_cg_topic;

typedef struct kb_consumer_group_env {
    bool (*topic_by_name)(void *ctx, const char *name, kb_cg_topic *out);
    /* The i-th topic of the registry; false past the last. */
    bool (*topic_at)(void *ctx, size_t i, kb_cg_topic *out);
    /* A new member id (v0 requests only). */
    void (*member_id)(char out[37], void *ctx);
    void *ctx;
    int32_t heartbeat_interval_ms;
    int32_t session_timeout_ms;
    int32_t max_size;
    const char *const *assignors; /* short names; the first is the default */
    int32_t nassignors;
} kb_consumer_group_env;

typedef struct kb_consumer_group {
    int32_t group_epoch;
    int32_t assignment_epoch;
    kb_cg_member **members; /* in join order */
    int32_t nmembers;
    int32_t members_cap;
    uint64_t meta_sig;     /* subscribed topics (names, ids, partitions) at group_epoch */
    int64_t meta_deadline; /* when the metadata is read again */
    bool dirty;            /* a subscription changed since meta_sig */
    int32_t stored_epoch;  /* the epoch of the last ConsumerGroupMetadata record */
    int32_t stored_assignment_epoch; /* of the last TargetAssignmentMetadata record */
    char **gone;           /* ids of members removed since the records were written */
    int32_t ngone;
    int32_t gone_cap;
} kb_consumer_group;

/* The answer to a heartbeat. Pointers borrow from the group. */
typedef struct kb_consumer_group_result {
    kp_err err;
    const char *message; /* NULL: none */
    const char *member_id;
    int32_t epoch;
    int32_t heartbeat_interval_ms;
    bool with_assignment;
    const kb_cg_set *assignment;
} kb_consumer_group_result;

typedef struct kb_consumer_group_client {
    kp_str client_id;
    kp_str client_host;
    int16_t version;
} kb_consumer_group_client;

kb_consumer_group *kb_consumer_group_new(void);
void kb_consumer_group_free(kb_consumer_group *cg);

/* The checks Kafka makes of a ConsumerGroupHeartbeat before it looks at
 * the group: INVALID_REQUEST, UNSUPPORTED_ASSIGNOR or
 * INVALID_REGULAR_EXPRESSION with a message (or KP_ERR__NOMEM). */
kp_err kb_consumer_group_check_request(const kb_consumer_group_env *env,
                               const kp_consumer_group_heartbeat_req *rq, int16_t version,
                               const char **message);
/* A ConsumerGroupHeartbeat (group id checked by the caller). res->err is
 * the Kafka error; the return value is KP_ERR__NOMEM or NONE. */
kp_err kb_consumer_group_heartbeat(kb_consumer_group *cg, const kb_consumer_group_env *env,
                           const kp_consumer_group_heartbeat_req *rq, const kb_consumer_group_client *cl,
                           int64_t now, kb_consumer_group_result *res);
/* Fences members whose session or revocation deadline passed. */
void kb_consumer_group_tick(kb_consumer_group *cg, const kb_consumer_group_env *env, int64_t now);
int64_t kb_consumer_group_next_deadline(const kb_consumer_group *cg);

kb_consumer_group_state kb_consumer_group_state_of(const kb_consumer_group *cg);
const char *kb_consumer_group_state_name(kb_consumer_group_state s);
kb_cg_member *kb_consumer_group_member_find(const kb_consumer_group *cg, kp_str member_id);
/* The assignor in use: the first asked for by a member, else the default. */
const char *kb_consumer_group_assignor(const kb_consumer_group *cg, const kb_consumer_group_env *env);
/* Whether any member subscribes to topic (by name or regex). */
/* A whole-name POSIX extended regex ("^(re)$") under the limits above
 * (INVALID_REGULAR_EXPRESSION); ListTransactions' TransactionalIdPattern
 * uses it too. On success the caller regfree()s *re. */
kp_err kb_consumer_group_compile_regex(kp_str s, regex_t *re);

bool kb_consumer_group_subscribed_to(const kb_consumer_group *cg, kp_str topic);

/* ---- restoring from records (kb_consumer_group_rec) ----------------------------- */

/* Creates or updates member_id from its ConsumerGroupMemberMetadata. */
kp_err kb_consumer_group_restore_member(kb_consumer_group *cg, kp_str member_id,
                                const kp_consumer_group_member_metadata_value *v);
/* Drops member_id (its metadata tombstone), without writing anything. */
void kb_consumer_group_restore_remove(kb_consumer_group *cg, kp_str member_id);
/* After the last record: sessions start at now, the topic signature is
 * taken as it is (no epoch bump for what did not change), nothing is dirty. */
kp_err kb_consumer_group_restored(kb_consumer_group *cg, const kb_consumer_group_env *env, int64_t now);

/* OffsetCommit/TxnOffsetCommit checks (Kafka's validateOffsetCommit). */
kp_err kb_consumer_group_check_commit(const kb_consumer_group *cg, kp_str member_id, int32_t epoch,
                              int16_t version, bool transactional);
/* OffsetFetch v9+ checks (member_id null and epoch < 0: no check). */
kp_err kb_consumer_group_check_fetch(const kb_consumer_group *cg, kp_str member_id, int32_t epoch);

/* Whether m subscribes to topic by name or (at the last refresh) regex. */
bool kb_cg_member_subscribes(const kb_cg_member *m, const char *topic);

#endif
