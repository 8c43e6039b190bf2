/* Handlers for configuration: DescribeConfigs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_broker.h"
#include "kb_dispatch.h"
#include "kb_tconf.h"
#include "kb_topics.h"

enum { RESOURCE_TOPIC = 2, RESOURCE_BROKER = 4 };

typedef kp_describe_configs_resp_describe_configs_result config_result;
typedef kp_describe_configs_resp_describe_configs_resource_result config_entry;
typedef kp_describe_configs_req_describe_configs_resource config_resource;

static bool key_wanted(const config_resource *res, const char *key)
{
    if (res->configuration_keys.n < 0)
        return true;
    for (int32_t i = 0; i < res->configuration_keys.n; i++)
        if (kp_str_eq_c(res->configuration_keys.v[i], key))
            return true;
    return false;
}

/* Synonyms in precedence order: the topic's own value, the broker key, the default. */
static kp_err topic_synonyms(kb_req *req, const kb_topic *t, const char *key, config_entry *e)
{
    const kb_topic_default *td = kb_config_topic_default(req->broker->cfg, key);
    const char *own = kb_topic_config_get(t, key);
    bool broker_set = td != NULL && td->td_source != KB_SRC_DEFAULT && td->td_source != KB_SRC_UNSET;
    int n = (own != NULL) + (broker_set ? 1 : 0);
    if (!KB_ARRAY_ALLOC(req, e->synonyms, n))
        return KP_ERR__NOMEM;
    int i = 0;
    if (own != NULL)
        e->synonyms.v[i++] = (kp_describe_configs_resp_describe_configs_synonym){
            kb_req_str(req, key), kb_req_str(req, own), KB_CS_DYNAMIC_TOPIC};
    if (broker_set)
        e->synonyms.v[i++] = (kp_describe_configs_resp_describe_configs_synonym){
            kb_req_str(req, td->td_broker_key), kb_req_str(req, td->td_value), KB_CS_STATIC_BROKER};
    return KP_ERR_NONE;
}

static kp_err describe_topic(kb_req *req, const kp_describe_configs_req *rq,
                             const config_resource *res, config_result *out)
{
    kb_topic *t = kb_topics_find(req->broker->topics, res->resource_name);
    if (t == NULL) {
        out->error_code = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        out->error_message = kb_req_str(req, "Topic does not exist");
        return KP_ERR_NONE;
    }
    size_t n = kb_tconf_count();
    if (!KB_ARRAY_ALLOC(req, out->configs, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const char *key = kb_tconf_key(i);
        if (!key_wanted(res, key))
            continue;
        config_entry *e = &out->configs.v[used++];
        kp_describe_configs_resp_describe_configs_resource_result_defaults(e);
        const char *value = kb_tconf_effective(req->broker->cfg, t, key, &e->config_source);
        e->name = kb_req_str(req, key);
        e->value = kb_req_str(req, value != NULL ? value : "");
        e->is_default = e->config_source == KB_CS_DEFAULT;
        e->config_type = kb_tconf_type(i);
        e->documentation = KP_STR_NULL;
        if (rq->include_synonyms && topic_synonyms(req, t, key, e) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    out->configs.n = used;
    return KP_ERR_NONE;
}

static kp_err describe_broker(kb_req *req, const config_resource *res, config_result *out)
{
    const kb_config *cfg = req->broker->cfg;
    char self[16];
    snprintf(self, sizeof(self), "%d", req->broker->node_id);
    if (res->resource_name.len > 0 && !kp_str_eq_c(res->resource_name, self)) {
        out->error_code = KP_ERR_INVALID_REQUEST;
        out->error_message = kb_req_str(req, "Unexpected broker id");
        return KP_ERR_NONE;
    }
    if (!KB_ARRAY_ALLOC(req, out->configs, cfg->raw_n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < cfg->raw_n; i++) {
        const kb_config_entry *ce = &cfg->raw[i];
        if (!key_wanted(res, ce->ce_key))
            continue;
        config_entry *e = &out->configs.v[used++];
        kp_describe_configs_resp_describe_configs_resource_result_defaults(e);
        e->name = kb_req_str(req, ce->ce_key);
        e->is_sensitive = kb_config_key_sensitive(ce->ce_key);
        e->value = e->is_sensitive ? KP_STR_NULL : kb_req_str(req, ce->ce_value);
        e->read_only = true;
        e->config_source = KB_CS_STATIC_BROKER;
        e->config_type = KB_CT_STRING;
        e->documentation = KP_STR_NULL;
    }
    out->configs.n = used;
    return KP_ERR_NONE;
}

kp_err kb_h_describe_configs(kb_req *req, const kp_describe_configs_req *rq,
                             kp_describe_configs_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->results, rq->resources.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->resources.n; i++) {
        const config_resource *res = &rq->resources.v[i];
        config_result *out = &rs->results.v[i];
        kp_describe_configs_resp_describe_configs_result_defaults(out);
        out->resource_type = res->resource_type;
        out->resource_name = res->resource_name;
        kp_err e = KP_ERR_NONE;
        if (res->resource_type == RESOURCE_TOPIC)
            e = describe_topic(req, rq, res, out);
        else if (res->resource_type == RESOURCE_BROKER)
            e = describe_broker(req, res, out);
        else
            out->error_code = KP_ERR_INVALID_REQUEST;
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}
