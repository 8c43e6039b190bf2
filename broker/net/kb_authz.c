#include "kb_authz.h"

#include <string.h>

#include "kb_conn.h"
#include "kb_log.h"

#define OPBIT(op) (1 << (op))

/* Kafka's AclEntry.supportedOperations, as bitfields. */
static int32_t supported_ops(int8_t res_type)
{
    switch (res_type) {
    case KB_RES_TOPIC:
        return OPBIT(KB_OP_READ) | OPBIT(KB_OP_WRITE) | OPBIT(KB_OP_CREATE) |
               OPBIT(KB_OP_DESCRIBE) | OPBIT(KB_OP_DELETE) | OPBIT(KB_OP_ALTER) |
               OPBIT(KB_OP_DESCRIBE_CONFIGS) | OPBIT(KB_OP_ALTER_CONFIGS);
    case KB_RES_GROUP:
        return OPBIT(KB_OP_READ) | OPBIT(KB_OP_DESCRIBE) | OPBIT(KB_OP_DELETE) |
               OPBIT(KB_OP_DESCRIBE_CONFIGS) | OPBIT(KB_OP_ALTER_CONFIGS);
    case KB_RES_CLUSTER:
        return OPBIT(KB_OP_CREATE) | OPBIT(KB_OP_CLUSTER_ACTION) | OPBIT(KB_OP_DESCRIBE_CONFIGS) |
               OPBIT(KB_OP_ALTER_CONFIGS) | OPBIT(KB_OP_IDEMPOTENT_WRITE) | OPBIT(KB_OP_ALTER) |
               OPBIT(KB_OP_DESCRIBE);
    case KB_RES_TRANSACTIONAL_ID:
        return OPBIT(KB_OP_DESCRIBE) | OPBIT(KB_OP_WRITE);
    default:
        return 0;
    }
}

/* The client's address: the peer without its ":port". */
static void client_host(const kb_req *req, char *out, size_t cap)
{
    const char *peer = req->conn->peer;
    const char *colon = strrchr(peer, ':');
    size_t len = colon != NULL ? (size_t)(colon - peer) : strlen(peer);
    if (len >= cap)
        len = cap - 1;
    memcpy(out, peer, len);
    out[len] = '\0';
}

bool kb_authz_check(const kb_req *req, int8_t op, int8_t res_type, kp_str name)
{
    char host[64];
    client_host(req, host, sizeof host);
    bool ok = kb_acl_authorize(req->broker->acl, req->conn->principal, host, op, res_type, name);
    if (!ok)
        KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN,
               "msg=\"authorization denied\" conn=%llu principal=\"%s\" host=%s operation=%s "
               "resource_type=%s",
               (unsigned long long)req->conn->id, req->conn->principal, host,
               kb_acl_op_name(op), kb_acl_res_name(res_type));
    return ok;
}

bool kb_authz_cluster(const kb_req *req, int8_t op)
{
    return kb_authz(req, op, KB_RES_CLUSTER, KP_STR_LIT(KB_ACL_CLUSTER_NAME));
}

bool kb_authz_create_topic(const kb_req *req, kp_str name)
{
    return kb_authz_cluster(req, KB_OP_CREATE) || kb_authz(req, KB_OP_CREATE, KB_RES_TOPIC, name);
}

int16_t kb_authz_config(const kb_req *req, int8_t op, int8_t config_type, kp_str name)
{
    if (!kb_authz_on(req))
        return KP_ERR_NONE;
    switch (config_type) {
    case 2:
        return kb_authz(req, op, KB_RES_TOPIC, name) ? KP_ERR_NONE
                                                     : KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    case 32:
        return kb_authz(req, op, KB_RES_GROUP, name) ? KP_ERR_NONE
                                                     : KP_ERR_GROUP_AUTHORIZATION_FAILED;
    default:
        return kb_authz_cluster(req, op) ? KP_ERR_NONE : KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
    }
}

const char *kb_authz_message(int16_t code)
{
    switch (code) {
    case KP_ERR_TOPIC_AUTHORIZATION_FAILED:
        return "Topic authorization failed.";
    case KP_ERR_GROUP_AUTHORIZATION_FAILED:
        return "Group authorization failed.";
    case KP_ERR_CLUSTER_AUTHORIZATION_FAILED:
        return "Cluster authorization failed.";
    case KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        return "Transactional Id authorization failed.";
    default:
        return "";
    }
}

bool kb_authz_any(const kb_req *req, int8_t op, int8_t res_type)
{
    if (req->broker->acl == NULL)
        return true;
    char host[64];
    client_host(req, host, sizeof host);
    return kb_acl_authorize_any(req->broker->acl, req->conn->principal, host, op, res_type);
}

int16_t kb_authz_group_member(const kb_req *req, kp_str group_id, const kp_str *topics,
                              int32_t ntopics)
{
    if (!kb_authz(req, KB_OP_READ, KB_RES_GROUP, group_id))
        return KP_ERR_GROUP_AUTHORIZATION_FAILED;
    for (int32_t i = 0; i < ntopics; i++)
        if (!kb_authz(req, KB_OP_DESCRIBE, KB_RES_TOPIC, topics[i]))
            return KP_ERR_TOPIC_AUTHORIZATION_FAILED;
    return KP_ERR_NONE;
}

int32_t kb_authz_ops(const kb_req *req, int8_t res_type, kp_str name)
{
    int32_t ops = supported_ops(res_type);
    if (req->broker->acl == NULL)
        return ops;
    char host[64];
    client_host(req, host, sizeof host);
    int32_t allowed = 0;
    for (int8_t op = KB_OP_READ; op <= KB_OP_DESCRIBE_TOKENS; op++)
        if ((ops & OPBIT(op)) != 0 &&
            kb_acl_authorize(req->broker->acl, req->conn->principal, host, op, res_type, name))
            allowed |= OPBIT(op);
    return allowed;
}
