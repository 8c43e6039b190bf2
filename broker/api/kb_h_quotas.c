/* Handlers for client quotas: DescribeClientQuotas (filter by entity
 * components, strict or not) and AlterClientQuotas (validated per entry,
 * persisted, enforced from the next request on). */
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_admin.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_quota.h"

enum { MATCH_EXACT = 0, MATCH_DEFAULT = 1, MATCH_SPECIFIED = 2 };

typedef kp_describe_client_quotas_req_component_data component;

static const kb_quota_entity *entity_of(const kb_quota_entry *e, kp_str type)
{
    for (size_t i = 0; i < e->nentity; i++)
        if (kp_str_eq_c(type, e->entity[i].type))
            return &e->entity[i];
    return NULL;
}

static bool component_matches(const kb_quota_entry *e, const component *c)
{
    const kb_quota_entity *ent = entity_of(e, c->entity_type);
    if (ent == NULL)
        return false;
    switch (c->match_type) {
    case MATCH_EXACT:
        return ent->name != NULL && c->match.len >= 0 && kp_str_eq_c(c->match, ent->name);
    case MATCH_DEFAULT:
        return ent->name == NULL;
    default:
        return true;
    }
}

static bool entry_matches(const kb_quota_entry *e, const kp_describe_client_quotas_req *rq)
{
    for (int32_t i = 0; i < rq->components.n; i++)
        if (!component_matches(e, &rq->components.v[i]))
            return false;
    return !rq->strict || e->nentity == (size_t)rq->components.n;
}

static kp_err fill_entry(kb_req *req, const kb_quota_entry *e,
                         kp_describe_client_quotas_resp_entry_data *out)
{
    if (!KB_ARRAY_ALLOC(req, out->entity, e->nentity) || !KB_ARRAY_ALLOC(req, out->values, e->nvalues))
        return KP_ERR__NOMEM;
    for (size_t k = 0; k < e->nentity; k++) {
        out->entity.v[k].entity_type = kb_req_str(req, e->entity[k].type);
        out->entity.v[k].entity_name =
            e->entity[k].name != NULL ? kb_req_str(req, e->entity[k].name) : KP_STR_NULL;
    }
    for (size_t k = 0; k < e->nvalues; k++) {
        out->values.v[k].key = kb_req_str(req, e->values[k].key);
        out->values.v[k].value = e->values[k].value;
    }
    return KP_ERR_NONE;
}

kp_err kb_h_describe_client_quotas(kb_req *req, const kp_describe_client_quotas_req *rq,
                                   kp_describe_client_quotas_resp *rs)
{
    const kb_quotas *q = req->broker->quotas;
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE_CONFIGS)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = kb_cstr(kb_authz_message(rs->error_code));
        return KB_ARRAY_ALLOC(req, rs->entries, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    for (int32_t i = 0; i < rq->components.n; i++) {
        const component *c = &rq->components.v[i];
        if (c->match_type < MATCH_EXACT || c->match_type > MATCH_SPECIFIED ||
            (c->match_type == MATCH_EXACT && c->match.len < 0)) {
            rs->error_code = KP_ERR_INVALID_REQUEST;
            rs->error_message = kb_req_str(req, "Invalid match type or missing match");
            return KB_ARRAY_ALLOC(req, rs->entries, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
        }
    }
    size_t n = kb_quotas_count(q);
    if (!KB_ARRAY_ALLOC(req, rs->entries, n))
        return KP_ERR__NOMEM;
    int32_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const kb_quota_entry *e = kb_quotas_at(q, i);
        if (entry_matches(e, rq) && fill_entry(req, e, &rs->entries.v[used++]) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
    }
    rs->entries.n = used;
    return KP_ERR_NONE;
}

static int entity_cmp(const void *a, const void *b)
{
    return strcmp(((const kb_quota_entity *)a)->type, ((const kb_quota_entity *)b)->type);
}

/* Validates and (unless validate_only) applies one entry. */
static int16_t alter_entry(kb_req *req, const kp_alter_client_quotas_req_entry_data *in,
                           bool validate_only, kb_msgbuf *msg)
{
    size_t ne = in->entity.n > 0 ? (size_t)in->entity.n : 0;
    size_t no = in->ops.n > 0 ? (size_t)in->ops.n : 0;
    kb_quota_entity *ent = kp_arena_calloc(&req->arena, ne + 1, sizeof(*ent));
    kb_quota_op *ops = kp_arena_calloc(&req->arena, no + 1, sizeof(*ops));
    if (ent == NULL || ops == NULL)
        return KP_ERR_UNKNOWN_SERVER_ERROR;
    for (size_t k = 0; k < ne; k++) {
        kp_str name = in->entity.v[k].entity_name;
        ent[k].type = (char *)(uintptr_t)kb_req_cstr(req, in->entity.v[k].entity_type);
        ent[k].name = name.len < 0 ? NULL : (char *)(uintptr_t)kb_req_cstr(req, name);
    }
    for (size_t k = 0; k < no; k++)
        ops[k] = (kb_quota_op){kb_req_cstr(req, in->ops.v[k].key), in->ops.v[k].value,
                               in->ops.v[k].remove};
    qsort(ent, ne, sizeof(*ent), entity_cmp);
    kp_err e = kb_quotas_check(ent, ne, ops, no, msg);
    if (e == KP_ERR_NONE && !validate_only)
        e = kb_quotas_alter(req->broker->quotas, ent, ne, ops, no);
    return (int16_t)kp_err_to_wire(e);
}

kp_err kb_h_alter_client_quotas(kb_req *req, const kp_alter_client_quotas_req *rq,
                                kp_alter_client_quotas_resp *rs)
{
    if (!KB_ARRAY_ALLOC(req, rs->entries, rq->entries.n))
        return KP_ERR__NOMEM;
    bool allowed = kb_authz_cluster(req, KB_OP_ALTER_CONFIGS);
    for (int32_t i = 0; i < rq->entries.n; i++) {
        const kp_alter_client_quotas_req_entry_data *in = &rq->entries.v[i];
        kp_alter_client_quotas_resp_entry_data *out = &rs->entries.v[i];
        kb_msgbuf msg = {""};
        if (!KB_ARRAY_ALLOC(req, out->entity, in->entity.n))
            return KP_ERR__NOMEM;
        for (int32_t k = 0; k < in->entity.n; k++) {
            out->entity.v[k].entity_type = in->entity.v[k].entity_type;
            out->entity.v[k].entity_name = in->entity.v[k].entity_name;
        }
        if (!allowed)
            kb_msgf(&msg, "%s", kb_authz_message(KP_ERR_CLUSTER_AUTHORIZATION_FAILED));
        out->error_code = allowed ? alter_entry(req, in, rq->validate_only, &msg)
                                  : KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        out->error_message = out->error_code != KP_ERR_NONE ? kb_req_str(req, msg.text)
                                                            : KP_STR_NULL;
    }
    return KP_ERR_NONE;
}
