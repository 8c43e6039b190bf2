#include "kb_forward_errors.h"

#include "kp_msg.h"

#define UNKNOWN_SERVER_ERROR_TEXT \
    "The server experienced an unexpected error when processing the request."

static kp_str message_for(int16_t code)
{
    return code == KP_ERR_UNKNOWN_SERVER_ERROR ? KP_STR_LIT(UNKNOWN_SERVER_ERROR_TEXT) : KP_STR_NULL;
}

/* Answers each item of the request's array in with code in the response's
 * array out; COPY (with i the item's index) echoes what identifies it. */
#define ECHO_ERRORS(req, out, in, code, COPY)                   \
    do {                                                        \
        if (!KB_ARRAY_ALLOC(req, out, (in).n))                  \
            break;                                              \
        for (int32_t i = 0; i < (in).n; i++) {                  \
            (out).v[i].error_code = (code);                     \
            (out).v[i].error_message = message_for(code);       \
            COPY;                                               \
        }                                                       \
    } while (0)

#define ECHO_RESOURCES(req, rq, rs, code)                                       \
    ECHO_ERRORS(req, (rs)->responses, (rq)->resources, code,                    \
                ((rs)->responses.v[i].resource_type = (rq)->resources.v[i].resource_type, \
                 (rs)->responses.v[i].resource_name = (rq)->resources.v[i].resource_name))

static void create_topics(kb_req *req, int16_t code)
{
    const kp_create_topics_req *rq = req->request;
    kp_create_topics_resp *rs = req->response;
    /* configs null, sizes -1: as Kafka leaves a topic that failed */
    ECHO_ERRORS(req, rs->topics, rq->topics, code,
                (rs->topics.v[i].name = rq->topics.v[i].name, rs->topics.v[i].num_partitions = -1,
                 rs->topics.v[i].replication_factor = -1, rs->topics.v[i].configs.n = -1));
}

static void delete_topics(kb_req *req, int16_t code)
{
    const kp_delete_topics_req *rq = req->request;
    kp_delete_topics_resp *rs = req->response;
    if (rq->topics.n > 0)
        ECHO_ERRORS(req, rs->responses, rq->topics, code,
                    (rs->responses.v[i].name = rq->topics.v[i].name,
                     rs->responses.v[i].topic_id = rq->topics.v[i].topic_id));
    else if (rq->topic_names.n > 0)
        ECHO_ERRORS(req, rs->responses, rq->topic_names, code,
                    rs->responses.v[i].name = rq->topic_names.v[i]);
}

static void create_partitions(kb_req *req, int16_t code)
{
    const kp_create_partitions_req *rq = req->request;
    kp_create_partitions_resp *rs = req->response;
    ECHO_ERRORS(req, rs->results, rq->topics, code, rs->results.v[i].name = rq->topics.v[i].name);
}

static void alter_configs(kb_req *req, int16_t code)
{
    const kp_alter_configs_req *rq = req->request;
    kp_alter_configs_resp *rs = req->response;
    ECHO_RESOURCES(req, rq, rs, code);
}

static void incremental_alter_configs(kb_req *req, int16_t code)
{
    const kp_incremental_alter_configs_req *rq = req->request;
    kp_incremental_alter_configs_resp *rs = req->response;
    ECHO_RESOURCES(req, rq, rs, code);
}

static void create_acls(kb_req *req, int16_t code)
{
    const kp_create_acls_req *rq = req->request;
    kp_create_acls_resp *rs = req->response;
    ECHO_ERRORS(req, rs->results, rq->creations, code, (void)0);
}

static void delete_acls(kb_req *req, int16_t code)
{
    const kp_delete_acls_req *rq = req->request;
    kp_delete_acls_resp *rs = req->response;
    ECHO_ERRORS(req, rs->filter_results, rq->filters, code, (void)0);
}

/* One result per user named, deletions first, each user once. */
static void alter_scram(kb_req *req, int16_t code)
{
    const kp_alter_user_scram_credentials_req *rq = req->request;
    kp_alter_user_scram_credentials_resp *rs = req->response;
    int32_t nd = rq->deletions.n > 0 ? rq->deletions.n : 0;
    int32_t nu = rq->upsertions.n > 0 ? rq->upsertions.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->results, nd + nu))
        return;
    int32_t n = 0;
    for (int32_t i = 0; i < nd + nu; i++) {
        kp_str user = i < nd ? rq->deletions.v[i].name : rq->upsertions.v[i - nd].name;
        bool seen = false;
        for (int32_t j = 0; j < n && !seen; j++)
            seen = kp_str_eq(rs->results.v[j].user, user);
        if (seen)
            continue;
        rs->results.v[n].user = user;
        rs->results.v[n].error_code = code;
        rs->results.v[n].error_message = message_for(code);
        n++;
    }
    rs->results.n = n;
}

static void copy_entity(kb_req *req, const kp_alter_client_quotas_req_entry_data *in,
                        kp_alter_client_quotas_resp_entry_data *out)
{
    if (in->entity.n <= 0 || !KB_ARRAY_ALLOC(req, out->entity, in->entity.n))
        return;
    for (int32_t j = 0; j < in->entity.n; j++) {
        out->entity.v[j].entity_type = in->entity.v[j].entity_type;
        out->entity.v[j].entity_name = in->entity.v[j].entity_name;
    }
}

static void alter_client_quotas(kb_req *req, int16_t code)
{
    const kp_alter_client_quotas_req *rq = req->request;
    kp_alter_client_quotas_resp *rs = req->response;
    ECHO_ERRORS(req, rs->entries, rq->entries, code,
                copy_entity(req, &rq->entries.v[i], &rs->entries.v[i]));
}

static void elect_leaders(kb_req *req, int16_t code)
{
    kp_elect_leaders_resp *rs = req->response;
    rs->error_code = code;
}

static void alter_reassignments(kb_req *req, int16_t code)
{
    const kp_alter_partition_reassignments_req *rq = req->request;
    kp_alter_partition_reassignments_resp *rs = req->response;
    rs->allow_replication_factor_change = rq->allow_replication_factor_change;
    rs->error_code = code;
    rs->error_message = message_for(code);
}

static void update_features(kb_req *req, int16_t code)
{
    kp_update_features_resp *rs = req->response;
    rs->error_code = code;
    rs->error_message = message_for(code);
    KB_ARRAY_ALLOC(req, rs->results, 0);
}

static void unregister_broker(kb_req *req, int16_t code)
{
    kp_unregister_broker_resp *rs = req->response;
    rs->error_code = code;
    rs->error_message = message_for(code);
}

bool kb_forward_fill_error(kb_req *req, int16_t code)
{
    switch (req->api_key) {
    case KP_API_CREATE_TOPICS: create_topics(req, code); return true;
    case KP_API_DELETE_TOPICS: delete_topics(req, code); return true;
    case KP_API_CREATE_PARTITIONS: create_partitions(req, code); return true;
    case KP_API_ALTER_CONFIGS: alter_configs(req, code); return true;
    case KP_API_INCREMENTAL_ALTER_CONFIGS: incremental_alter_configs(req, code); return true;
    case KP_API_CREATE_ACLS: create_acls(req, code); return true;
    case KP_API_DELETE_ACLS: delete_acls(req, code); return true;
    case KP_API_ALTER_USER_SCRAM_CREDENTIALS: alter_scram(req, code); return true;
    case KP_API_ALTER_CLIENT_QUOTAS: alter_client_quotas(req, code); return true;
    case KP_API_ELECT_LEADERS: elect_leaders(req, code); return true;
    case KP_API_ALTER_PARTITION_REASSIGNMENTS: alter_reassignments(req, code); return true;
    case KP_API_UPDATE_FEATURES: update_features(req, code); return true;
    case KP_API_UNREGISTER_BROKER: unregister_broker(req, code); return true;
    default: return false;
    }
}
