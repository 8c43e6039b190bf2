#include "kb_consumer_group_rec.h"

#include <stdlib.h>
#include <string.h>

/* Kafka's MemberState numbers in ConsumerGroupCurrentMemberAssignmentValue. */
#define STATE_STABLE     0
#define STATE_UNREVOKED  1
#define STATE_UNRELEASED 2

/* ---- writing ------------------------------------------------------------ */

typedef kp_consumer_group_target_assignment_member_value_topic_partition target_tps;
typedef kp_consumer_group_current_member_assignment_value_topic_partitions current_tps;

/* How many topics s spans (it is sorted by topic). */
static int32_t topic_runs(const kb_cg_set *s)
{
    int32_t n = 0;
    for (int32_t i = 0; i < s->n; i++)
        n += i == 0 || memcmp(&s->v[i].topic, &s->v[i - 1].topic, sizeof(kp_uuid)) != 0;
    return n;
}

/* The partitions of the run of s starting at *i, copied into a; *i moves
 * past the run. */
static int32_t *run_partitions(const kb_cg_set *s, int32_t *i, kp_arena *a, int32_t *n)
{
    int32_t j = *i;
    while (j < s->n && memcmp(&s->v[j].topic, &s->v[*i].topic, sizeof(kp_uuid)) == 0)
        j++;
    int32_t *p = kp_arena_calloc(a, (size_t)(j - *i) + 1, sizeof(*p));
    for (int32_t k = *i; p != NULL && k < j; k++)
        p[k - *i] = s->v[k].partition;
    *n = p != NULL ? j - *i : 0;
    *i = j;
    return p;
}

static kp_err fill_target(const kb_cg_set *s, kp_arena *a,
                          kp_consumer_group_target_assignment_member_value *v)
{
    int32_t nt = topic_runs(s);
    v->topic_partitions.n = nt;
    v->topic_partitions.v = kp_arena_calloc(a, (size_t)nt + 1, sizeof(target_tps));
    if (v->topic_partitions.v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t t = 0, i = 0; t < nt; t++) {
        target_tps *tp = &v->topic_partitions.v[t];
        tp->topic_id = s->v[i].topic;
        if ((tp->partitions.v = run_partitions(s, &i, a, &tp->partitions.n)) == NULL)
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static kp_err fill_current(const kb_cg_set *s, kp_arena *a, int32_t *n, current_tps **out)
{
    int32_t nt = topic_runs(s);
    *n = nt;
    if ((*out = kp_arena_calloc(a, (size_t)nt + 1, sizeof(current_tps))) == NULL)
        return KP_ERR__NOMEM;
    for (int32_t t = 0, i = 0; t < nt; t++) {
        current_tps *tp = &(*out)[t];
        tp->topic_id = s->v[i].topic;
        if ((tp->partitions.v = run_partitions(s, &i, a, &tp->partitions.n)) == NULL)
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static kp_str opt(const char *s)
{
    return s != NULL ? kp_str_from(s) : KP_STR_NULL;
}

/* One record: the key of type for (group, member) and a value encoded by
 * encode(value struct, version 0) after its int16 version. */
typedef struct rec_out {
    kb_consumer_group_rec_emit *emit;
    void *arg;
    kp_str group;
} rec_out;

static void emit_key(const rec_out *o, int16_t type, kp_str member, kp_writer *value)
{
    kp_writer k;
    kp_writer_init(&k, 64);
    kb_offsets_write_cg_key(&k, type, o->group, member);
    o->emit(o->arg, &k, value);
}

static kp_err emit_member(const rec_out *o, const kb_cg_member *m, kp_arena *a)
{
    kp_consumer_group_member_metadata_value v;
    kp_consumer_group_member_metadata_value_defaults(&v);
    v.instance_id = opt(m->instance_id);
    v.rack_id = opt(m->rack_id);
    v.client_id = kp_str_from(m->client_id != NULL ? m->client_id : "");
    v.client_host = kp_str_from(m->client_host != NULL ? m->client_host : "");
    v.subscribed_topic_regex = kp_str_from(m->regex != NULL ? m->regex : "");
    v.rebalance_timeout_ms = m->rebalance_timeout_ms;
    v.server_assignor = opt(m->assignor);
    v.subscribed_topic_names.n = m->ntopics;
    v.subscribed_topic_names.v = kp_arena_calloc(a, (size_t)m->ntopics + 1, sizeof(kp_str));
    if (v.subscribed_topic_names.v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < m->ntopics; i++)
        v.subscribed_topic_names.v[i] = kp_str_from(m->topics[i]);
    kp_writer w;
    kp_writer_init(&w, 128);
    kp_write_i16(&w, 0);
    kp_consumer_group_member_metadata_value_encode(&w, &v, 0);
    emit_key(o, KB_OFFSETS_CG_MEMBER_KEY, kp_str_from(m->member_id), &w);
    return KP_ERR_NONE;
}

static kp_err emit_target(const rec_out *o, const kb_cg_member *m, kp_arena *a)
{
    kp_consumer_group_target_assignment_member_value v;
    if (fill_target(&m->target, a, &v) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kp_writer w;
    kp_writer_init(&w, 64);
    kp_write_i16(&w, 0);
    kp_consumer_group_target_assignment_member_value_encode(&w, &v, 0);
    emit_key(o, KB_OFFSETS_CG_TARGET_KEY, kp_str_from(m->member_id), &w);
    return KP_ERR_NONE;
}

static int8_t state_number(kb_cg_member_state s)
{
    return s == KB_CMS_UNREVOKED    ? STATE_UNREVOKED
           : s == KB_CMS_UNRELEASED ? STATE_UNRELEASED
                                    : STATE_STABLE;
}

static kp_err emit_current(const rec_out *o, const kb_cg_member *m, kp_arena *a)
{
    kp_consumer_group_current_member_assignment_value v;
    kp_consumer_group_current_member_assignment_value_defaults(&v);
    v.member_epoch = m->epoch;
    v.previous_member_epoch = m->prev_epoch;
    v.state = state_number(m->state);
    if (fill_current(&m->assigned, a, &v.assigned_partitions.n, &v.assigned_partitions.v) !=
            KP_ERR_NONE ||
        fill_current(&m->revoking, a, &v.partitions_pending_revocation.n,
                     &v.partitions_pending_revocation.v) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    kp_writer w;
    kp_writer_init(&w, 64);
    kp_write_i16(&w, 0);
    kp_consumer_group_current_member_assignment_value_encode(&w, &v, 0);
    emit_key(o, KB_OFFSETS_CG_CURRENT_KEY, kp_str_from(m->member_id), &w);
    return KP_ERR_NONE;
}

static void emit_epoch(const rec_out *o, int16_t type, int32_t epoch)
{
    kp_writer w;
    kp_writer_init(&w, 16);
    if (type == KB_OFFSETS_CGROUP_KEY_VERSION) {
        kb_offsets_write_cgroup_value(&w, epoch);
    } else {
        kp_consumer_group_target_assignment_metadata_value v = {.assignment_epoch = epoch};
        kp_write_i16(&w, 0);
        kp_consumer_group_target_assignment_metadata_value_encode(&w, &v, 0);
    }
    emit_key(o, type, KP_STR_NULL, &w);
}

static void emit_tombstones(const rec_out *o, kp_str member)
{
    emit_key(o, KB_OFFSETS_CG_CURRENT_KEY, member, NULL);
    emit_key(o, KB_OFFSETS_CG_TARGET_KEY, member, NULL);
    emit_key(o, KB_OFFSETS_CG_MEMBER_KEY, member, NULL);
}

/* Each member record of one kind that is dirty. */
static kp_err emit_dirty(const rec_out *o, const kb_consumer_group *cg, unsigned kind, kp_arena *a)
{
    kp_err e = KP_ERR_NONE;
    for (int32_t i = 0; e == KP_ERR_NONE && i < cg->nmembers; i++) {
        const kb_cg_member *m = cg->members[i];
        if (!(m->dirty & kind))
            continue;
        e = kind == KB_CG_DIRTY_META     ? emit_member(o, m, a)
            : kind == KB_CG_DIRTY_TARGET ? emit_target(o, m, a)
                                         : emit_current(o, m, a);
    }
    return e;
}

kp_err kb_consumer_group_rec_changes(const kb_consumer_group *cg, kp_str group, kb_consumer_group_rec_emit *emit,
                             void *arg)
{
    rec_out o = {emit, arg, group};
    kp_arena a;
    kp_arena_init(&a);
    for (int32_t i = 0; i < cg->ngone; i++)
        emit_tombstones(&o, kp_str_from(cg->gone[i]));
    kp_err e = emit_dirty(&o, cg, KB_CG_DIRTY_META, &a);
    if (e == KP_ERR_NONE && cg->group_epoch != cg->stored_epoch)
        emit_epoch(&o, KB_OFFSETS_CGROUP_KEY_VERSION, cg->group_epoch);
    if (e == KP_ERR_NONE)
        e = emit_dirty(&o, cg, KB_CG_DIRTY_TARGET, &a);
    if (e == KP_ERR_NONE && cg->assignment_epoch != cg->stored_assignment_epoch)
        emit_epoch(&o, KB_OFFSETS_CG_TARGET_EPOCH_KEY, cg->assignment_epoch);
    if (e == KP_ERR_NONE)
        e = emit_dirty(&o, cg, KB_CG_DIRTY_CURRENT, &a);
    kp_arena_fini(&a);
    return e;
}

void kb_consumer_group_rec_written(kb_consumer_group *cg)
{
    for (int32_t i = 0; i < cg->nmembers; i++)
        cg->members[i]->dirty = 0;
    for (int32_t i = 0; i < cg->ngone; i++)
        free(cg->gone[i]);
    cg->ngone = 0;
    cg->stored_epoch = cg->group_epoch;
    cg->stored_assignment_epoch = cg->assignment_epoch;
}

void kb_consumer_group_rec_delete(const kb_consumer_group *cg, kp_str group, kb_consumer_group_rec_emit *emit,
                          void *arg)
{
    rec_out o = {emit, arg, group};
    for (int32_t i = 0; i < cg->nmembers; i++)
        emit_tombstones(&o, kp_str_from(cg->members[i]->member_id));
    emit_key(&o, KB_OFFSETS_CG_TARGET_EPOCH_KEY, KP_STR_NULL, NULL);
    emit_key(&o, KB_OFFSETS_CGROUP_KEY_VERSION, KP_STR_NULL, NULL);
}

/* ---- loading ------------------------------------------------------------ */

/* A reader over a value after its int16 version, which must be 0. */
static bool value_v0(kp_slice value, kp_reader *r)
{
    if (value.len < 2)
        return false;
    *r = kp_reader_make(value.p, (size_t)value.len);
    return kp_read_i16(r) == 0;
}

static kp_err load_set(const current_tps *v, int32_t n, kb_cg_set *out)
{
    kb_cg_tpvec t = {0};
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < v[i].partitions.n; j++)
            kb_cg_tpvec_push(&t, &v[i].topic_id, v[i].partitions.v[j]);
    return kb_cg_tpvec_seal(&t, out) ? KP_ERR_NONE : KP_ERR__NOMEM;
}

static kp_err load_target(kb_cg_member *m, kp_reader *r, kp_arena *a)
{
    kp_consumer_group_target_assignment_member_value v;
    kp_consumer_group_target_assignment_member_value_defaults(&v);
    if (kp_consumer_group_target_assignment_member_value_decode(r, a, &v, 0) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    kb_cg_tpvec t = {0};
    for (int32_t i = 0; i < v.topic_partitions.n; i++)
        for (int32_t j = 0; j < v.topic_partitions.v[i].partitions.n; j++)
            kb_cg_tpvec_push(&t, &v.topic_partitions.v[i].topic_id,
                             v.topic_partitions.v[i].partitions.v[j]);
    return kb_cg_tpvec_seal(&t, &m->target) ? KP_ERR_NONE : KP_ERR__NOMEM;
}

static kp_err load_current(kb_cg_member *m, kp_reader *r, kp_arena *a)
{
    kp_consumer_group_current_member_assignment_value v;
    kp_consumer_group_current_member_assignment_value_defaults(&v);
    if (kp_consumer_group_current_member_assignment_value_decode(r, a, &v, 0) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    m->epoch = v.member_epoch;
    m->prev_epoch = v.previous_member_epoch;
    m->state = v.state == STATE_UNREVOKED    ? KB_CMS_UNREVOKED
               : v.state == STATE_UNRELEASED ? KB_CMS_UNRELEASED
                                             : KB_CMS_STABLE;
    kp_err e = load_set(v.assigned_partitions.v, v.assigned_partitions.n, &m->assigned);
    if (e == KP_ERR_NONE)
        e = load_set(v.partitions_pending_revocation.v, v.partitions_pending_revocation.n,
                     &m->revoking);
    return e;
}

static kp_err load_epoch(kb_consumer_group *cg, int16_t type, kp_slice value, kp_arena *a, kp_reader *r)
{
    if (type == KB_OFFSETS_CGROUP_KEY_VERSION) {
        int32_t epoch;
        kp_err e = kb_offsets_read_cgroup_value(value, a, &epoch);
        if (e == KP_ERR_NONE)
            cg->group_epoch = epoch;
        return e;
    }
    kp_consumer_group_target_assignment_metadata_value v;
    kp_consumer_group_target_assignment_metadata_value_defaults(&v);
    if (kp_consumer_group_target_assignment_metadata_value_decode(r, a, &v, 0) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    cg->assignment_epoch = v.assignment_epoch;
    return KP_ERR_NONE;
}

kp_err kb_consumer_group_rec_load(kb_consumer_group *cg, const kb_offsets_key *k, kp_slice value, kp_arena *a)
{
    kp_reader r;
    if (value.len < 0) {
        if (k->cg_type == KB_OFFSETS_CG_MEMBER_KEY)
            kb_consumer_group_restore_remove(cg, k->member);
        return KP_ERR_NONE; /* 7, 8: the member goes with its 5; 3, 6: the caller's */
    }
    if (!value_v0(value, &r))
        return KP_ERR__CORRUPT;
    if (k->cg_type == KB_OFFSETS_CGROUP_KEY_VERSION || k->cg_type == KB_OFFSETS_CG_TARGET_EPOCH_KEY)
        return load_epoch(cg, k->cg_type, value, a, &r);
    if (k->cg_type == KB_OFFSETS_CG_MEMBER_KEY) {
        kp_consumer_group_member_metadata_value v;
        kp_consumer_group_member_metadata_value_defaults(&v);
        if (kp_consumer_group_member_metadata_value_decode(&r, a, &v, 0) != KP_ERR_NONE)
            return KP_ERR__CORRUPT;
        return kb_consumer_group_restore_member(cg, k->member, &v);
    }
    kb_cg_member *m = kb_consumer_group_member_find(cg, k->member);
    if (m == NULL)
        return KP_ERR_NONE; /* its metadata was tombstoned: stale */
    return k->cg_type == KB_OFFSETS_CG_TARGET_KEY ? load_target(m, &r, a)
                                                  : load_current(m, &r, a);
}
