#include "kb_group_describe.h"

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_context.h"

const kb_group *kb_group_describe_find(kb_req *req, kp_str id, bool ops, const kb_group_kind *k,
                                       int16_t *err, kp_str *msg, int32_t *ops_out)
{
    if (id.len <= 0) {
        *err = KP_ERR_INVALID_GROUP_ID;
        return NULL;
    }
    if (!kb_authz(req, KB_OP_DESCRIBE, KB_RES_GROUP, id)) {
        *err = KP_ERR_GROUP_AUTHORIZATION_FAILED;
        return NULL;
    }
    if (ops)
        *ops_out = kb_authz_ops(req, KB_RES_GROUP, id);
    const kb_group *g = kb_groups_find(kb_group_coord_groups(req->broker), id);
    if (g != NULL && k->is(g))
        return g;
    *err = KP_ERR_GROUP_ID_NOT_FOUND;
    *msg = kp_str_from(g == NULL ? kp_arena_printf(&req->arena, "Group %.*s not found.", id.len,
                                                   id.p)
                                 : kp_arena_printf(&req->arena, "Group %.*s is not a %s group.",
                                                   id.len, id.p, k->name));
    return NULL;
}

int16_t kb_group_describe_error(kb_req *req, bool feature_on, int16_t err, kp_str id)
{
    kb_topic *t;
    if (!feature_on)
        return KP_ERR_UNSUPPORTED_VERSION;
    if (kb_group_coord_offsets_topic(req->broker, &t) != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return err != KP_ERR_NONE ? err
                              : kb_cv_check_coordinator(req, KB_GROUP_COORD_OFFSETS_TOPIC, id);
}
