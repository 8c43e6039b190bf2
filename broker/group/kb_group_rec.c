#include "kb_group.h"

#include <stdlib.h>
#include <string.h>

#include "kb_group_impl.h"

/* ---- queries and records ------------------------------------------------ */

/* Adds the topics of one consumer subscription to the check; false if the
 * bytes are not a subscription. */
static bool subscription_has(kp_slice meta, kp_str topic, bool *has)
{
    if (meta.len < 2)
        return false;
    kp_reader r = kp_reader_make(meta.p, (size_t)meta.len);
    int16_t v = kp_read_i16(&r);
    if (v < 0)
        return false;
    kp_arena a;
    kp_arena_init(&a);
    kp_consumer_protocol_subscription sub;
    kp_consumer_protocol_subscription_defaults(&sub);
    bool ok = kp_consumer_protocol_subscription_decode(&r, &a, &sub, v > 3 ? 3 : v) == KP_ERR_NONE;
    for (int32_t i = 0; ok && i < sub.topics.n; i++)
        *has = *has || kp_str_eq(sub.topics.v[i], topic);
    kp_arena_fini(&a);
    return ok;
}

bool kb_group_subscribed_to(const kb_group *g, kp_str topic)
{
    if (g->protocol_type == NULL || strcmp(g->protocol_type, "consumer") != 0)
        return false;
    if (g->nmembers == 0)
        return false;
    if (g->protocol_name == NULL)
        return true;
    bool has = false;
    for (int32_t i = 0; i < g->nmembers; i++)
        if (!subscription_has(kb_group_member_metadata(g->members[i], g->protocol_name), topic, &has))
            return true;
    return has;
}

static kp_str view(const char *s)
{
    return s != NULL ? kp_str_from(s) : KP_STR_NULL;
}

kp_err kb_group_to_record(const kb_group *g, kp_arena *a, kp_group_metadata_value *out)
{
    kp_group_metadata_value_defaults(out);
    out->protocol_type = kp_str_from(g->protocol_type != NULL ? g->protocol_type : "");
    out->generation = g->generation;
    out->protocol = view(g->protocol_name);
    out->leader = view(g->leader_id);
    out->current_state_timestamp = g->state_timestamp;
    out->members.n = g->nmembers;
    out->members.v = kp_arena_calloc(a, (size_t)g->nmembers + 1, sizeof(*out->members.v));
    if (out->members.v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < g->nmembers; i++) {
        const kb_group_member *m = g->members[i];
        kp_group_metadata_value_member_metadata *mm = &out->members.v[i];
        mm->member_id = kp_str_from(m->member_id);
        mm->group_instance_id = view(m->instance_id);
        mm->client_id = kp_str_from(m->client_id);
        mm->client_host = kp_str_from(m->client_host);
        mm->rebalance_timeout = m->rebalance_timeout_ms;
        mm->session_timeout = m->session_timeout_ms;
        mm->subscription = kb_group_member_metadata(m, g->protocol_name);
        mm->assignment = (kp_slice){m->assignment != NULL ? m->assignment : (const uint8_t *)"",
                                    m->assignment_len};
    }
    return KP_ERR_NONE;
}

/* One loaded member: a single protocol (the group's) with its metadata. */
static kp_err member_from_record(kb_group *g, const kp_group_metadata_value_member_metadata *mm,
                                 int64_t now)
{
    kp_join_group_req_join_group_request_protocol proto = {kp_str_from(g->protocol_name),
                                                           mm->subscription};
    kp_join_group_req rq;
    kp_join_group_req_defaults(&rq);
    rq.session_timeout_ms = mm->session_timeout;
    rq.rebalance_timeout_ms = mm->rebalance_timeout;
    rq.group_instance_id = mm->group_instance_id;
    rq.protocol_type = kp_str_from(g->protocol_type);
    rq.protocols.n = 1;
    rq.protocols.v = &proto;
    kb_group_client cl = {mm->client_id, mm->client_host, 0};
    char *id = kp_str_cdup(mm->member_id);
    if (id == NULL)
        return KP_ERR__NOMEM;
    kp_err e = kbg_add_member_quiet(g, &rq, &cl, id, now);
    free(id);
    if (e != KP_ERR_NONE)
        return e;
    return kbg_member_set_assignment(g, g->members[g->nmembers - 1], mm->assignment);
}

kp_err kb_group_from_record(kb_group *g, const kp_group_metadata_value *v, int64_t now)
{
    while (g->nmembers > 0) {
        g->bytes -= kbg_member_bytes(g->members[g->nmembers - 1]);
        kbg_member_free(g->members[--g->nmembers]);
    }
    kbg_set_owned(&g->leader_id, NULL);
    g->generation = v->generation;
    g->state_timestamp = v->current_state_timestamp;
    char *type = v->protocol_type.len > 0 ? kp_str_cdup(v->protocol_type) : NULL;
    char *name = kp_str_cdup(v->protocol);
    free(g->protocol_type);
    free(g->protocol_name);
    g->protocol_type = type;
    g->protocol_name = name;
    g->state = KB_GS_EMPTY;
    if (name == NULL || type == NULL)
        return KP_ERR_NONE;
    for (int32_t i = 0; i < v->members.n; i++) {
        kp_err e = member_from_record(g, &v->members.v[i], now);
        if (e != KP_ERR_NONE)
            return e;
    }
    if (g->nmembers > 0) {
        g->state = KB_GS_STABLE;
        if (v->leader.len >= 0 && kb_group_member_find(g, v->leader) != NULL) {
            char *l = kp_str_cdup(v->leader);
            free(g->leader_id);
            g->leader_id = l;
        }
    }
    return KP_ERR_NONE;
}
