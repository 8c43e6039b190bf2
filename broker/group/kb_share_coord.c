/* The share coordinator on __share_group_state (kb_share_coord.h). */
#include "kb_share_coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_partition_log.h"
#include "kb_share_group.h"
#include "kb_share_state_rec.h"
#include "kp_batch.h"

#define LOAD_BATCH_MAX (64 << 20) /* a batch larger than this is corrupt */

kp_err kb_share_coord_state_topic(kb_broker *b, kb_topic **out)
{
    char seg[16];
    snprintf(seg, sizeof(seg), "%d", b->cfg->share_coordinator_state_topic_segment_bytes);
    kb_topic_config cfg[] = {{"cleanup.policy", "delete"},
                             {"compression.type", "producer"},
                             {"retention.ms", "-1"},
                             {"segment.bytes", seg}};
    return kb_topics_internal(b->topics, KP_STR_LIT(KB_SHARE_STATE_TOPIC),
                              b->cfg->share_coordinator_state_topic_num_partitions, cfg,
                              sizeof(cfg) / sizeof(cfg[0]), out);
}

/* ---- writing ------------------------------------------------------------- */

/* Appends one record of sp's key (value NULL: the tombstone). */
static kp_err append(kb_broker *b, const kb_group *g, const kb_share_part *sp,
                     kb_share_state_type type, const kb_share_state_value *value, kp_arena *a)
{
    kb_topic *t;
    kp_err e = kb_share_coord_state_topic(b, &t);
    if (e != KP_ERR_NONE)
        return e;
    kp_str group = kp_str_from(g->id);
    kp_writer k, v;
    kp_writer_init(&k, 64);
    kp_writer_init(&v, value != NULL ? 128 : 0);
    kb_share_state_write_key(&k, type, group, &sp->topic, sp->partition);
    if (value != NULL)
        kb_share_state_write_value(&v, type, value, a);
    int32_t p = kb_share_state_partition_for(group, &sp->topic, sp->partition, t->npartitions);
    if (k.err != KP_ERR_NONE || v.err != KP_ERR_NONE)
        e = KP_ERR__NOMEM;
    else
        e = kb_partition_log_append_record(
            b, t, p, kb_group_coord_wall(b), (kp_slice){k.buf, (int32_t)k.len},
            value != NULL ? (kp_slice){v.buf, (int32_t)v.len} : (kp_slice){NULL, -1});
    kp_writer_fini(&k);
    kp_writer_fini(&v);
    if (e != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_GROUP, "msg=\"cannot write share state\" group=%s "
               "partition=%d error=%s", g->id, p, kp_err_name(e));
    return e;
}

static int32_t leader_epoch(kb_broker *b, const kb_share_part *sp)
{
    const kb_topic *t = kb_topics_find_id(b->topics, &sp->topic);
    return t != NULL && sp->partition < t->npartitions ? t->partitions[sp->partition].leader_epoch
                                                       : -1;
}

/* One share-partition's ShareSnapshot or ShareUpdate. */
static kp_err write_part(kb_broker *b, const kb_group *g, kb_share_part *sp)
{
    kb_share_persist *p = &sp->persist;
    bool snap = p->snapshot_due ||
                p->updates >= b->cfg->share_coordinator_snapshot_update_records_per_snapshot;
    int64_t now = kb_group_coord_wall(b);
    int32_t max = (int32_t)(sp->end - sp->start) + 1;
    kp_arena a;
    kp_arena_init(&a);
    kb_share_state_batch *bs = kp_arena_calloc(&a, (size_t)max, sizeof(*bs));
    int32_t n = bs == NULL ? -1
                : snap     ? kb_share_part_batches(sp, sp->start, sp->end - 1, bs, max)
                           : kb_share_part_batches(sp, p->dirty_first, p->dirty_last, bs, max);
    kb_share_state_value v = {
        .snapshot_epoch = snap ? p->snapshot_epoch + 1 : (p->snapshot_epoch > 0 ? p->snapshot_epoch : 0),
        .state_epoch = p->state_epoch,
        .leader_epoch = leader_epoch(b, sp),
        .start = snap || p->start_moved ? sp->start : -1,
        .delivery_complete_count = kb_share_part_done_count(sp),
        .create_ts = now,
        .write_ts = now,
        .batches = bs,
        .nbatches = n,
    };
    kp_err e = n < 0 ? KP_ERR__NOMEM
                     : append(b, g, sp, snap ? KB_SHARE_STATE_SNAPSHOT : KB_SHARE_STATE_UPDATE, &v, &a);
    kp_arena_fini(&a);
    if (e != KP_ERR_NONE)
        return e;
    if (snap) {
        p->snapshot_epoch = v.snapshot_epoch;
        p->updates = 0;
        p->snapshot_due = false;
    } else {
        p->updates++;
    }
    p->start_moved = false;
    p->dirty_first = 0;
    p->dirty_last = -1;
    return KP_ERR_NONE;
}

void kb_share_coord_flush(kb_broker *b, kb_group *g)
{
    if (g->sg == NULL || !kb_share_parts_dirty(g->sg->parts))
        return;
    kb_share_parts *ps = g->sg->parts;
    for (size_t i = 0; i < kb_share_parts_count(ps); i++) {
        kb_share_part *sp = kb_share_parts_at(ps, i);
        if (kb_share_part_dirty(sp) && write_part(b, g, sp) != KP_ERR_NONE)
            return; /* kept marked: the next event retries */
    }
}

kp_err kb_share_coord_delete(kb_broker *b, kb_group *g, kb_share_part *sp)
{
    kp_err e = append(b, g, sp, KB_SHARE_STATE_SNAPSHOT, NULL, NULL);
    if (e == KP_ERR_NONE)
        kb_share_parts_drop(g->sg->parts, sp);
    return e;
}

kp_err kb_share_coord_delete_topic(kb_broker *b, kb_group *g, const kp_uuid *topic)
{
    kb_share_parts *ps = g->sg != NULL ? g->sg->parts : NULL;
    for (size_t i = kb_share_parts_count(ps); i-- > 0;) {
        kb_share_part *sp = kb_share_parts_at(ps, i);
        if (topic != NULL && memcmp(&sp->topic, topic, sizeof(*topic)) != 0)
            continue;
        kp_err e = kb_share_coord_delete(b, g, sp);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

/* ---- the persister's operations ------------------------------------------ */

kb_share_part *kb_share_coord_find(kb_broker *b, kp_str group, const kp_uuid *topic,
                                   int32_t partition)
{
    kb_group *g = kb_groups_find(kb_group_coord_groups(b), group);
    return g != NULL && g->sg != NULL ? kb_share_parts_find(g->sg->parts, topic, partition)
                                      : NULL;
}

static kp_err load_group(kb_broker *b, kp_str id, kb_group **out);

/* The group and share-partition to change (made at start when new). */
static kp_err persister_part(kb_broker *b, kp_str group, const kp_uuid *topic, int32_t partition,
                             int32_t state_epoch, int64_t start, kb_group **g,
                             kb_share_part **sp)
{
    kp_err e = load_group(b, group, g);
    if (e == KP_ERR__CORRUPT)
        return KP_ERR_INVALID_GROUP_ID;
    if (e != KP_ERR_NONE)
        return e;
    *sp = kb_share_parts_find((*g)->sg->parts, topic, partition);
    if (*sp != NULL && state_epoch < (*sp)->persist.state_epoch)
        return KP_ERR_FENCED_STATE_EPOCH;
    if (*sp == NULL)
        e = kb_share_parts_get((*g)->sg->parts, topic, partition, start >= 0 ? start : 0, sp);
    return e;
}

/* Writes what changed; the wire error. */
static kp_err persister_flush(kb_broker *b, kb_group *g, kb_share_part *sp)
{
    kp_err e = write_part(b, g, sp);
    kb_group_coord_touch(b, g);
    return e == KP_ERR_NONE ? KP_ERR_NONE : KP_ERR_COORDINATOR_NOT_AVAILABLE;
}

kp_err kb_share_coord_initialize(kb_broker *b, kp_str group, const kp_uuid *topic,
                                 int32_t partition, int32_t state_epoch, int64_t start)
{
    kb_group *g;
    kb_share_part *sp;
    if (start < 0 || start > INT64_MAX - KB_SHARE_PART_MAX_WINDOW)
        return KP_ERR_INVALID_REQUEST;
    kp_err e = persister_part(b, group, topic, partition, state_epoch, start, &g, &sp);
    if (e != KP_ERR_NONE)
        return e;
    kb_share_part_reset(sp, start);
    sp->persist.state_epoch = state_epoch;
    return persister_flush(b, g, sp);
}

kp_err kb_share_coord_write(kb_broker *b, kp_str group, const kp_uuid *topic, int32_t partition,
                            int32_t state_epoch, int64_t start, const kb_share_state_batch *bs,
                            int32_t n)
{
    kb_group *g;
    kb_share_part *sp;
    kp_err e = persister_part(b, group, topic, partition, state_epoch, start, &g, &sp);
    if (e != KP_ERR_NONE)
        return e;
    bool fresh = sp->persist.snapshot_due;
    e = kb_share_part_restore(sp, fresh, start, bs, n);
    if (e == KP_ERR__CORRUPT)
        return KP_ERR_INVALID_REQUEST;
    if (e != KP_ERR_NONE)
        return e;
    sp->persist.state_epoch = state_epoch;
    sp->persist.start_moved = start >= 0;
    for (int32_t i = 0; i < n; i++) {
        if (bs[i].first < sp->persist.dirty_first || sp->persist.dirty_first > sp->persist.dirty_last)
            sp->persist.dirty_first = bs[i].first;
        if (bs[i].last > sp->persist.dirty_last)
            sp->persist.dirty_last = bs[i].last;
    }
    return persister_flush(b, g, sp);
}

kp_err kb_share_coord_remove(kb_broker *b, kp_str group, const kp_uuid *topic, int32_t partition)
{
    kb_group *g = kb_groups_find(kb_group_coord_groups(b), group);
    kb_share_part *sp = kb_share_coord_find(b, group, topic, partition);
    if (sp == NULL)
        return KP_ERR_NONE;
    kp_err e = kb_share_coord_delete(b, g, sp);
    kb_group_coord_touch(b, g);
    return e == KP_ERR_NONE ? KP_ERR_NONE : KP_ERR_COORDINATOR_NOT_AVAILABLE;
}

/* ---- loading ------------------------------------------------------------- */

/* The share group a record names, made when new; NULL when the id belongs
 * to a group of another type (the record is skipped). */
static kp_err load_group(kb_broker *b, kp_str id, kb_group **out)
{
    kb_groups *gs = kb_group_coord_groups(b);
    kb_group *g = kb_groups_find(gs, id);
    *out = NULL;
    if (g != NULL && g->sg == NULL)
        return KP_ERR__CORRUPT;
    if (g == NULL && kb_groups_get(gs, id, &g) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    if (g->sg == NULL && (g->sg = kb_share_group_new()) == NULL)
        return KP_ERR__NOMEM;
    if (g->sg->parts == NULL && (g->sg->parts = kb_share_parts_new()) == NULL)
        return KP_ERR__NOMEM;
    *out = g;
    return KP_ERR_NONE;
}

static kp_err load_state(kb_broker *b, const kb_share_state_key *k, const kb_share_state_value *v)
{
    kb_group *g = kb_groups_find(kb_group_coord_groups(b), k->group);
    kb_share_part *sp = g != NULL && g->sg != NULL
                            ? kb_share_parts_find(g->sg->parts, &k->topic, k->partition)
                            : NULL;
    if (v == NULL) { /* tombstone */
        if (sp != NULL)
            kb_share_parts_drop(g->sg->parts, sp);
        return KP_ERR_NONE;
    }
    bool snap = k->type == KB_SHARE_STATE_SNAPSHOT;
    if (sp == NULL && v->start < 0)
        return KP_ERR__CORRUPT; /* an update with no state to apply to */
    kp_err e = load_group(b, k->group, &g);
    if (e == KP_ERR_NONE && sp == NULL)
        e = kb_share_parts_get(g->sg->parts, &k->topic, k->partition, v->start, &sp);
    if (e == KP_ERR_NONE)
        e = kb_share_part_restore(sp, snap || sp->persist.snapshot_due, v->start, v->batches,
                                  v->nbatches);
    if (e != KP_ERR_NONE)
        return e;
    kb_share_persist *p = &sp->persist;
    if (snap) {
        p->state_epoch = v->state_epoch;
        p->snapshot_epoch = v->snapshot_epoch;
        p->updates = 0;
    } else {
        p->updates++;
    }
    p->snapshot_due = false;
    p->start_moved = false;
    p->dirty_first = 0;
    p->dirty_last = -1;
    return KP_ERR_NONE;
}

static kp_err load_record(void *arg, const kp_record *rec, kp_arena *a)
{
    kb_share_state_key k;
    kb_share_state_value v;
    kp_err e = kb_share_state_read_key(rec->key, a, &k);
    if (e == KP_ERR_NONE && rec->value.len >= 0)
        e = kb_share_state_read_value(k.type, rec->value, a, &v);
    if (e == KP_ERR_NONE)
        e = load_state(arg, &k, rec->value.len >= 0 ? &v : NULL);
    return e;
}

/* Share groups the log left with no share-partition go. */
static size_t load_finish(kb_broker *b)
{
    kb_groups *gs = kb_group_coord_groups(b);
    size_t cur = 0, n = 0;
    for (kb_group *g; (g = kb_groups_next(gs, &cur)) != NULL;) {
        if (g->sg == NULL)
            continue;
        if (kb_share_parts_count(g->sg->parts) == 0 && g->sg->nmembers == 0)
            kb_groups_remove(gs, g);
        else
            n++;
    }
    return n;
}

kp_err kb_share_coord_load(kb_broker *b, char *err, size_t errlen)
{
    kb_topic *t = kb_topics_find(b->topics, KP_STR_LIT(KB_SHARE_STATE_TOPIC));
    if (t == NULL)
        return KP_ERR_NONE;
    kb_replay_counts ld = {0, 0};
    int32_t p = 0;
    kp_err e = kb_partition_log_replay_records(b, t, LOAD_BATCH_MAX, load_record, b, &ld, &p);
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "cannot load %s-%d: %s", KB_SHARE_STATE_TOPIC, p, kp_err_name(e));
        return KP_ERR__IO;
    }
    size_t groups = load_finish(b);
    KB_LOG(KB_LL_INFO, KB_SUB_GROUP,
           "msg=\"share state loaded\" share_groups=%zu records=%lld skipped=%lld", groups,
           (long long)ld.records, (long long)ld.skipped);
    return KP_ERR_NONE;
}
