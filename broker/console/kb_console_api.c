#include "kb_console_api.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kb_acl.h"
#include "kb_config.h"
#include "kb_console_assets.h"
#include "kb_console_routes.h"
#include "kb_group_coord.h"
#include "kb_retention_guard.h"
#include "kb_topics.h"

#define BODY_SMALL (64 << 10)

void kb_console_error(kb_console_resp *out, int status, const char *msg)
{
    kb_json j;
    kb_json_init(&j, BODY_SMALL);
    kb_json_obj(&j);
    kb_json_kstr(&j, "error", msg);
    kb_json_obj_end(&j);
    out->status = status;
    out->content_type = "application/json";
    out->body = kb_json_take(&j, &out->body_len);
}

void kb_console_send(kb_json *j, kb_console_resp *out)
{
    out->body = kb_json_take(j, &out->body_len);
    if (out->body == NULL) {
        kb_console_error(out, 500, "the answer is too large or memory ran out");
        return;
    }
    out->status = 200;
    out->content_type = "application/json";
}

bool kb_console_allowed(const kb_console_api *api, const kb_console_req *rq, int8_t op,
                        int8_t res_type, const char *name)
{
    if (rq->principal == NULL || api->b->acl == NULL)
        return true;
    return kb_acl_authorize(api->b->acl, rq->principal, rq->peer_host ? rq->peer_host : "*", op,
                            res_type, kp_str_from(name));
}

bool kb_console_gate(const kb_console_api *api, const kb_console_req *rq, int8_t res_type,
                     const char *name, bool exists, int8_t op, kb_console_resp *out)
{
    if (!exists || !kb_console_allowed(api, rq, KB_OP_DESCRIBE, res_type, name)) {
        kb_console_error(out, 404, res_type == KB_RES_TOPIC ? "no such topic" : "no such group");
        return false;
    }
    if (!kb_console_allowed(api, rq, op, res_type, name)) {
        kb_console_error(out, 403, "not authorized");
        return false;
    }
    return true;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes src[0..n) into buf; false when it does not fit. */
static bool form_decode(const char *src, size_t n, char *buf, size_t cap, size_t *len)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (o + 1 >= cap)
            return false;
        char c = src[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%' && i + 2 < n && hexval(src[i + 1]) >= 0 && hexval(src[i + 2]) >= 0) {
            c = (char)(hexval(src[i + 1]) * 16 + hexval(src[i + 2]));
            i += 2;
        }
        buf[o++] = c;
    }
    buf[o] = '\0';
    if (len != NULL)
        *len = o;
    return true;
}

bool kb_console_query(const char *query, const char *name, char *buf, size_t cap, size_t *len)
{
    size_t nlen = strlen(name);
    for (const char *p = query; p != NULL && *p != '\0';) {
        const char *amp = strchr(p, '&');
        size_t plen = amp ? (size_t)(amp - p) : strlen(p);
        if (plen > nlen && strncmp(p, name, nlen) == 0 && p[nlen] == '=')
            return form_decode(p + nlen + 1, plen - nlen - 1, buf, cap, len);
        p = amp ? amp + 1 : NULL;
    }
    return false;
}

bool kb_console_query_long(const char *query, const char *name, int64_t *out)
{
    char buf[32];
    if (!kb_console_query(query, name, buf, sizeof(buf), NULL) || buf[0] == '\0')
        return false;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (errno != 0 || *end != '\0')
        return false;
    *out = v;
    return true;
}

/* What the retention guard has seen, for the page's banner. */
static void guard(kb_json *j, kb_broker *b)
{
    static const char *const modes[] = {"off", "warn", "hold"};
    const kb_retention_guard *g = kb_partition_log_guard(b);
    kb_retention_guard_stats st = {0};
    if (g != NULL)
        kb_retention_guard_stats_get(g, &st);
    kb_json_key(j, "retentionGuard");
    kb_json_obj(j);
    kb_json_kstr(j, "mode", modes[b->cfg->retention_guard]);
    kb_json_kint(j, "warnings", (int64_t)st.warnings);
    kb_json_kint(j, "recordsLost", (int64_t)st.records_lost);
    kb_json_kint(j, "holds", (int64_t)st.holds);
    kb_json_obj_end(j);
}

static void session(const kb_console_api *api, const kb_console_req *rq, kb_console_resp *out)
{
    kb_json j;
    kb_json_init(&j, BODY_SMALL);
    kb_json_obj(&j);
    kb_json_kstr(&j, "csrfToken", api->csrf_token);
    kb_json_kbool(&j, "writeEnabled", api->write_enable);
    kb_json_kstr(&j, "principal", rq->principal);
    kb_json_kstr(&j, "clusterId", api->b->cluster_id);
    kb_json_kstr(&j, "version", kb_console_version);
    guard(&j, api->b);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

static void listeners(kb_json *j, const kb_config *cfg)
{
    kb_json_key(j, "listeners");
    kb_json_arr(j);
    for (size_t i = 0; i < cfg->advertised_listeners.n; i++) {
        const kb_listener *l = &cfg->advertised_listeners.v[i];
        kb_json_obj(j);
        kb_json_kstr(j, "name", l->li_name);
        kb_json_kstr(j, "host", l->li_host);
        kb_json_kint(j, "port", l->li_port);
        kb_json_kstr(j, "securityProtocol", kb_security_protocol_name(l->li_protocol));
        kb_json_obj_end(j);
    }
    kb_json_arr_end(j);
}

static void broker_obj(kb_json *j, const kb_broker *b)
{
    kb_json_obj(j);
    kb_json_kint(j, "nodeId", b->node_id);
    kb_json_kstr(j, "version", kb_console_version);
    kb_json_kstr(j, "rack", NULL);
    listeners(j, b->cfg);
    kb_json_kbool(j, "controller", true);
    kb_json_obj_end(j);
}

static void brokers(const kb_console_api *api, kb_console_resp *out)
{
    kb_json j;
    kb_json_init(&j, BODY_SMALL);
    kb_json_obj(&j);
    kb_json_key(&j, "brokers");
    kb_json_arr(&j);
    broker_obj(&j, api->b);
    kb_json_arr_end(&j);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

static void cluster(const kb_console_api *api, kb_console_resp *out)
{
    kb_broker *b = api->b;
    size_t partitions = 0, ntopics = kb_topics_count(b->topics);
    for (size_t i = 0; i < ntopics; i++)
        partitions += (size_t)kb_topics_at(b->topics, i)->npartitions;
    kb_groups *gs = kb_group_coord_groups(b);
    kb_json j;
    kb_json_init(&j, BODY_SMALL);
    kb_json_obj(&j);
    kb_json_kstr(&j, "clusterId", b->cluster_id);
    kb_json_kint(&j, "controllerId", b->node_id);
    kb_json_kstr(&j, "mode", "single node");
    kb_json_kint(&j, "topics", (int64_t)ntopics);
    kb_json_kint(&j, "partitions", (int64_t)partitions);
    kb_json_kint(&j, "groups", gs ? (int64_t)kb_groups_count(gs) : 0);
    kb_json_key(&j, "brokers");
    kb_json_arr(&j);
    broker_obj(&j, b);
    kb_json_arr_end(&j);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

/* "/api/<family>/<name>[/<action>]": the name (decoded by the HTTP layer)
 * into name, and the action or "". */
static bool split_path(const char *rest, char *name, size_t cap, const char **action)
{
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n == 0 || n >= cap)
        return false;
    memcpy(name, rest, n);
    name[n] = '\0';
    *action = slash ? slash + 1 : "";
    return strchr(*action, '/') == NULL;
}

static bool is(const kb_console_req *rq, const char *method)
{
    return strcmp(rq->method, method) == 0;
}

static void topic_route(const kb_console_api *api, const kb_console_req *rq, const char *rest,
                        kb_console_resp *out)
{
    char name[KB_TOPIC_NAME_MAX + 1];
    const char *action;
    if (!split_path(rest, name, sizeof(name), &action))
        kb_console_error(out, 404, "no such topic");
    else if (action[0] == '\0' && is(rq, "GET"))
        kb_console_topic_show(api, rq, name, out);
    else if (strcmp(action, "records") == 0 && is(rq, "GET"))
        kb_console_topic_records(api, rq, name, out);
    else if (strcmp(action, "produce") == 0 && is(rq, "POST"))
        kb_console_topic_produce(api, rq, name, out);
    else
        kb_console_error(out, 405, "method not allowed");
}

static void group_route(const kb_console_api *api, const kb_console_req *rq, const char *rest,
                        kb_console_resp *out)
{
    char name[KB_GROUP_ID_MAX + 1];
    const char *action;
    if (!split_path(rest, name, sizeof(name), &action))
        kb_console_error(out, 404, "no such group");
    else if (action[0] == '\0' && is(rq, "GET"))
        kb_console_group_show(api, rq, name, out);
    else if (strcmp(action, "reset") == 0 && is(rq, "POST"))
        kb_console_group_reset(api, rq, name, out);
    else
        kb_console_error(out, 405, "method not allowed");
}

void kb_console_api_handle(const kb_console_api *api, const kb_console_req *rq,
                           kb_console_resp *out)
{
    const char *p = rq->path;
    memset(out, 0, sizeof(*out));
    if (strcmp(p, "/api/session") == 0 && is(rq, "GET"))
        session(api, rq, out);
    else if (strcmp(p, "/api/cluster") == 0 && is(rq, "GET"))
        cluster(api, out);
    else if (strcmp(p, "/api/brokers") == 0 && is(rq, "GET"))
        brokers(api, out);
    else if (strcmp(p, "/api/topics") == 0 && is(rq, "GET"))
        kb_console_topics_list(api, rq, out);
    else if (strncmp(p, "/api/topics/", 12) == 0)
        topic_route(api, rq, p + 12, out);
    else if (strcmp(p, "/api/groups") == 0 && is(rq, "GET"))
        kb_console_groups_list(api, rq, out);
    else if (strncmp(p, "/api/groups/", 12) == 0)
        group_route(api, rq, p + 12, out);
    else
        kb_console_error(out, 404, "no such API");
}
