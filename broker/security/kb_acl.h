/*
 * kb_acl: the ACL store and the authorization decision of Kafka's
 * StandardAuthorizer (authorizer.class.name=
 * org.apache.kafka.metadata.authorizer.StandardAuthorizer, or the older
 * kafka.security.authorizer.AclAuthorizer, treated the same).
 *
 * Job: keep the ACL bindings CreateAcls adds and DeleteAcls removes,
 * persist them, answer DescribeAcls / DeleteAcls filters, and decide
 * whether a principal connecting from a host may perform an operation on a
 * resource. The rules, as StandardAuthorizer applies them:
 *   - a principal named in super.users is allowed everything;
 *   - the ACLs that apply to a resource are those of its type whose pattern
 *     matches its name: LITERAL equal, LITERAL "*", or PREFIXED a prefix;
 *   - of those, an ACL matches the request when its principal is the
 *     request's or "User:*", its host is the client's address or "*", and
 *     its operation is the one asked, ALL, or (ALLOW ACLs only) one that
 *     implies it: READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS
 *     implies DESCRIBE_CONFIGS;
 *   - a matching DENY wins over any ALLOW; a matching ALLOW allows;
 *   - with no match: denied if any ACL applies to the resource at all,
 *     else allow.everyone.if.no.acl.found decides (default false).
 * Checks scan the store linearly: fine for the thousands of ACLs a single
 * broker holds (at most KB_ACL_MAX).
 *
 * On disk: <first log dir>/runnel-acls, text, one binding per line:
 *   "acl" restype pattern operation permission name principal host
 * with the four enums as Kafka's numeric codes and each string %-escaped
 * (every byte outside '!'..'~', and '%', as %XX). Written atomically
 * (kb_file_write_stream) after every change; a crash leaves the old set or
 * the new one.
 *
 * Invariants:
 *   1. Every stored binding passes kb_acl_check_new(): a concrete resource
 *      type, LITERAL or PREFIXED, an operation other than ANY/UNKNOWN,
 *      ALLOW or DENY, a non-empty name; CLUSTER bindings name
 *      "kafka-cluster".
 *   2. No two stored bindings are equal; at most KB_ACL_MAX are stored.
 *   3. Every string is at most KB_ACL_STR_MAX bytes.
 *
 * Ownership: the store owns its bindings; a kb_acl_binding returned by
 * kb_acl_at() borrows the store's strings until the next add, delete or
 * free. Bindings passed in are copied.
 *
 * Threading: loop thread only. kb_acl_save() writes and fsyncs a file on
 * the calling thread; it runs only for CreateAcls / DeleteAcls.
 *
 * Errors: kb_acl_open() returns KP_ERR__INVAL (an unsupported
 * authorizer.class.name, with one line naming key and value) or
 * KP_ERR__CORRUPT / KP_ERR__IO for the file; kb_acl_add() KP_ERR__NOMEM or
 * KP_ERR_POLICY_VIOLATION (store full); kb_acl_save() KP_ERR__IO /
 * KP_ERR__NOSPC.
 */
#ifndef KB_ACL_H
#define KB_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_file.h"
#include "kb_msgbuf.h"
#include "kp_types.h"

#define KB_ACL_MAX         100000 /* bindings in the store (Runnel's bound) */
#define KB_ACL_REQUEST_MAX 10000  /* per request (Kafka's MAX_RECORDS_PER_USER_OP) */
#define KB_ACL_STR_MAX     32767  /* bytes of a name, principal or host */
#define KB_ACL_FILE        "runnel-acls"
#define KB_ACL_CLUSTER_NAME "kafka-cluster"

/* Kafka's ResourceType codes. */
enum {
    KB_RES_UNKNOWN = 0,
    KB_RES_ANY = 1,
    KB_RES_TOPIC = 2,
    KB_RES_GROUP = 3,
    KB_RES_CLUSTER = 4,
    KB_RES_TRANSACTIONAL_ID = 5,
    KB_RES_DELEGATION_TOKEN = 6,
    KB_RES_USER = 7,
};

/* Kafka's AclOperation codes. */
enum {
    KB_OP_UNKNOWN = 0,
    KB_OP_ANY = 1,
    KB_OP_ALL = 2,
    KB_OP_READ = 3,
    KB_OP_WRITE = 4,
    KB_OP_CREATE = 5,
    KB_OP_DELETE = 6,
    KB_OP_ALTER = 7,
    KB_OP_DESCRIBE = 8,
    KB_OP_CLUSTER_ACTION = 9,
    KB_OP_DESCRIBE_CONFIGS = 10,
    KB_OP_ALTER_CONFIGS = 11,
    KB_OP_IDEMPOTENT_WRITE = 12,
    KB_OP_CREATE_TOKENS = 13,
    KB_OP_DESCRIBE_TOKENS = 14,
    KB_OP_TWO_PHASE_COMMIT = 15, /* Kafka 4.1 (KIP-939) */
};

/* Kafka's PatternType codes. */
enum {
    KB_PAT_UNKNOWN = 0,
    KB_PAT_ANY = 1,
    KB_PAT_MATCH = 2,
    KB_PAT_LITERAL = 3,
    KB_PAT_PREFIXED = 4,
};

/* Kafka's AclPermissionType codes. */
enum {
    KB_PERM_UNKNOWN = 0,
    KB_PERM_ANY = 1,
    KB_PERM_DENY = 2,
    KB_PERM_ALLOW = 3,
};

/* One binding (resource pattern + entry), or a filter when strings may be
 * null (len -1 = any) and the enums may be ANY (or MATCH for pattern). */
typedef struct kb_acl_binding {
    int8_t ab_res_type;
    int8_t ab_pattern;
    int8_t ab_op;
    int8_t ab_perm;
    kp_str ab_name;
    kp_str ab_principal;
    kp_str ab_host;
} kb_acl_binding;

typedef struct kb_acl_store kb_acl_store;

/* Reads authorizer.class.name: empty (the default) leaves *out NULL (no
 * authorizer); a supported class opens the store with super.users and
 * allow.everyone.if.no.acl.found and loads dir's file; anything else is
 * KP_ERR__INVAL with one line in err. */
kp_err kb_acl_open(const kb_config *cfg, const char *dir, kb_acl_store **out, char *err,
                   size_t errlen);
/* A store without config (tests): dir NULL keeps it in memory only;
 * super_users is Kafka's semicolon-separated list (NULL for none). */
kp_err kb_acl_new(const char *dir, const char *super_users, bool allow_everyone,
                  kb_acl_store **out);
void kb_acl_free(kb_acl_store *st);

/* Kafka's checks on a binding to create (CreateAcls): KP_ERR_NONE, or
 * KP_ERR_INVALID_REQUEST with Kafka's message. */
kp_err kb_acl_check_new(const kb_acl_binding *b, kb_msgbuf *msg);
/* Kafka's parse-time check on a binding or filter of any ACL API: no field
 * holds code 0 (UNKNOWN). Kafka closes the connection when one does. */
bool kb_acl_codes_known(const kb_acl_binding *b);
/* Kafka builds every binding of a CreateAcls before checking any: one with
 * an ANY type, pattern, operation or permission (or MATCH) fails the whole
 * request (UNKNOWN_SERVER_ERROR on every entry). */
bool kb_acl_buildable(const kb_acl_binding *b);
/* Kafka's checks on a DeleteAcls filter (no UNKNOWN part). */
kp_err kb_acl_check_filter(const kb_acl_binding *f, kb_msgbuf *msg);
/* Whether filter f matches binding b (Kafka's AclBindingFilter.matches). */
bool kb_acl_filter_matches(const kb_acl_binding *f, const kb_acl_binding *b);

/* Adds b (checked by the caller) unless an equal binding exists. */
kp_err kb_acl_add(kb_acl_store *st, const kb_acl_binding *b);
/* Removes every binding f matches, calling each(arg, binding) for it
 * before it goes (the view is valid during the call only). */
size_t kb_acl_delete(kb_acl_store *st, const kb_acl_binding *f,
                     void (*each)(void *arg, const kb_acl_binding *b), void *arg);
size_t kb_acl_count(const kb_acl_store *st);
void kb_acl_at(const kb_acl_store *st, size_t i, kb_acl_binding *out);
/* Writes the file (a no-op for a memory-only store). */
kp_err kb_acl_save(const kb_acl_store *st);

/* The decision for one action on a literal resource (see the rules above).
 * principal is "Type:name"; host the client's address. */
bool kb_acl_authorize(const kb_acl_store *st, const char *principal, const char *host, int8_t op,
                      int8_t res_type, kp_str name);
/* Kafka's authorizeByResourceType: may the principal perform op on some
 * resource of the type (an ALLOW not dominated by a DENY)? */
bool kb_acl_authorize_any(const kb_acl_store *st, const char *principal, const char *host,
                          int8_t op, int8_t res_type);

/* Kafka's names, for logs and errors: "TOPIC", "READ", "LITERAL", "ALLOW";
 * "UNKNOWN" for codes out of range. */
const char *kb_acl_res_name(int8_t code);
const char *kb_acl_op_name(int8_t code);
const char *kb_acl_pattern_name(int8_t code);
const char *kb_acl_perm_name(int8_t code);

#endif
