#include "kb_group_coord.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kb_consumer_group.h"
#include "kb_coord_load.h"
#include "kb_consumer_group_rec.h"
#include "kb_share_coord.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"
#include "kb_streams_coord.h"
#include "kb_streams_group.h"
#include "kb_group_conf.h"
#include "kb_lag.h"
#include "kb_log.h"
#include "kb_logscan.h"
#include "kb_partition_log.h"
#include "kb_partition_txn.h"
#include "kp_batch.h"
#include "kp_records.h"

#define EXPIRY_INTERVAL_MS (10 * 60 * 1000) /* offsets.retention.check.interval.ms */
#define LOAD_BATCH_MAX     (64 << 20)       /* a batch larger than this is corrupt */
#define TXN_OFFSETS_MAX    100000           /* pending transactional offsets, all groups */

/* An offset committed inside a transaction, waiting for its marker. */
typedef struct txn_offset {
    struct txn_offset *next;
    int64_t producer_id;
    int32_t partition; /* of __consumer_offsets, where the marker lands */
    char *group;
    kb_offset o; /* topic and metadata owned */
} txn_offset;

struct kb_group_coord {
    kb_broker *b;
    kb_groups *groups;
    kb_consumer_group_env cenv;
    const char *assignors[8];
    kb_timer expiry;
    txn_offset *pending;
    size_t npending;
    kb_lag *lag; /* lag per group and partition (kb_lag.h) */
    bool cluster;          /* cluster mode: groups follow the partitions' leadership */
    kb_coord_parts parts;  /* cluster mode: the partitions led here and their loads */
};

kb_lag *kb_group_coord_lag(kb_broker *b)
{
    return b->group_coord->lag;
}

int64_t kb_group_coord_now(kb_broker *b)
{
    return kb_loop_now_ms(b->loop);
}

int64_t kb_group_coord_wall(kb_broker *b)
{
    (void)b;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

kb_groups *kb_group_coord_groups(kb_broker *b)
{
    return b->group_coord->groups;
}

const kb_consumer_group_env *kb_group_coord_cgroup_env(kb_broker *b)
{
    return &b->group_coord->cenv;
}

void kb_group_coord_cgroup_env_for(kb_broker *b, const kb_group *g, kb_consumer_group_env *out)
{
    kp_str id = kp_str_from(g->id);
    *out = b->group_coord->cenv;
    out->session_timeout_ms = kb_group_conf_session_timeout_ms(b->gconf, b->cfg, id);
    out->heartbeat_interval_ms = kb_group_conf_heartbeat_interval_ms(b->gconf, b->cfg, id);
}

void kb_group_coord_share_env_for(kb_broker *b, const kb_group *g, kb_share_group_env *out)
{
    kp_str id = kp_str_from(g->id);
    out->topic_by_name = b->group_coord->cenv.topic_by_name;
    out->ctx = b->group_coord->cenv.ctx;
    out->session_timeout_ms = kb_group_conf_int(b->gconf, id, "share.session.timeout.ms",
                                                b->cfg->group_share_session_timeout_ms);
    out->heartbeat_interval_ms = kb_group_conf_int(b->gconf, id, "share.heartbeat.interval.ms",
                                                   b->cfg->group_share_heartbeat_interval_ms);
    out->max_size = b->cfg->group_share_max_size;
}

void kb_group_coord_share_limits_for(kb_broker *b, const kb_group *g, kb_share_limits *out)
{
    kp_str id = kp_str_from(g->id);
    out->lock_ms = kb_group_conf_int(b->gconf, id, "share.record.lock.duration.ms",
                                     b->cfg->group_share_record_lock_duration_ms);
    out->delivery_limit = (int16_t)b->cfg->group_share_delivery_count_limit;
    out->max_locks = b->cfg->group_share_partition_max_record_locks;
}

/* A share group's clock: members whose session passed leave (their share
 * sessions close and their records are released), then expired
 * acquisition locks are released. */
static void share_tick(kb_broker *b, kb_group *g, int64_t now)
{
    kb_share_group_env env;
    kb_share_limits lim;
    kb_group_coord_share_env_for(b, g, &env);
    kb_group_coord_share_limits_for(b, g, &lim);
    kb_share_group_tick(g->sg, &env, now);
    kb_share_parts *ps = g->sg->parts;
    for (size_t i = kb_share_session_count(ps); i-- > 0;) {
        kb_share_session *s = kb_share_session_at(ps, i);
        kp_str member = kp_str_from(s->member_id);
        if (kb_share_group_member_find(g->sg, member) == NULL) {
            kb_share_parts_release(ps, kb_share_member_key(member), &lim, now);
            kb_share_session_close(ps, s);
        }
    }
    kb_share_parts_release(ps, 0, &lim, now);
}

static int64_t share_deadline(const kb_share_group *sg)
{
    int64_t a = kb_share_group_next_deadline(sg), l = kb_share_parts_next_deadline(sg->parts);
    return a < l ? a : l;
}

/* ---- env callbacks ------------------------------------------------------ */

static void env_join_done(void *w, const kb_group *g, const kb_group_join_result *res, void *ctx)
{
    (void)ctx;
    ((kb_gwaiter *)w)->join_done(w, g, res);
}

static void env_sync_done(void *w, const kb_group *g, kp_err err, kp_slice assignment, void *ctx)
{
    (void)ctx;
    ((kb_gwaiter *)w)->sync_done(w, g, err, assignment);
}

static void env_uuid(char out[37], void *ctx)
{
    (void)ctx;
    uint8_t u[16];
    if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec;
        for (size_t i = 0; i < sizeof(u); i++, x = x * 6364136223846793005ull + 1)
            u[i] = (uint8_t)(x >> 56);
    }
    u[6] = (uint8_t)((u[6] & 0x0F) | 0x40); /* version 4, as UUID.randomUUID */
    u[8] = (uint8_t)((u[8] & 0x3F) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

static int64_t env_wall(void *ctx)
{
    return kb_group_coord_wall(((kb_group_coord *)ctx)->b);
}

static bool cenv_topic(const kb_topic *t, kb_cg_topic *out)
{
    if (t == NULL)
        return false;
    out->name = t->name;
    out->id = t->id;
    out->npartitions = t->npartitions;
    return true;
}

static bool cenv_topic_by_name(void *ctx, const char *name, kb_cg_topic *out)
{
    kb_group_coord *c = ctx;
    return cenv_topic(kb_topics_find(c->b->topics, kp_str_from(name)), out);
}

static bool cenv_topic_at(void *ctx, size_t i, kb_cg_topic *out)
{
    kb_group_coord *c = ctx;
    return i < kb_topics_count(c->b->topics) && cenv_topic(kb_topics_at(c->b->topics, i), out);
}

/* group.consumer.assignors: short names, or Kafka's class names for them. */
static void cenv_init(kb_group_coord *c, const kb_config *cfg)
{
    kb_consumer_group_env *e = &c->cenv;
    int32_t n = 0;
    for (size_t i = 0; i < cfg->group_consumer_assignors.n && n < 8; i++) {
        const char *a = cfg->group_consumer_assignors.v[i];
        size_t len = strlen(a);
        if (len >= 15 && strcmp(a + len - 15, "UniformAssignor") == 0)
            a = "uniform";
        else if (len >= 13 && strcmp(a + len - 13, "RangeAssignor") == 0)
            a = "range";
        if (strcmp(a, "uniform") != 0 && strcmp(a, "range") != 0)
            KB_LOG(KB_LL_WARN, KB_SUB_GROUP, "msg=\"unknown consumer group assignor ignored\" "
                   "assignor=%s", a);
        else
            c->assignors[n++] = a;
    }
    if (n == 0)
        c->assignors[n++] = "uniform";
    e->topic_by_name = cenv_topic_by_name;
    e->topic_at = cenv_topic_at;
    e->member_id = env_uuid;
    e->ctx = c;
    e->heartbeat_interval_ms = cfg->group_consumer_heartbeat_interval_ms;
    e->session_timeout_ms = cfg->group_consumer_session_timeout_ms;
    e->max_size = cfg->group_consumer_max_size;
    e->assignors = c->assignors;
    e->nassignors = n;
}

/* ---- writing records ---------------------------------------------------- */

kp_err kb_group_coord_offsets_topic(kb_broker *b, kb_topic **out)
{
    kb_topic_config cfg[] = {{"cleanup.policy", "compact"},
                             {"compression.type", "producer"},
                             {"segment.bytes", "104857600"}};
    return kb_topics_internal(b->topics, KP_STR_LIT(KB_GROUP_COORD_OFFSETS_TOPIC),
                              b->cfg->offsets_topic_num_partitions, cfg,
                              sizeof(cfg) / sizeof(cfg[0]), out);
}

/* Records of one append: keys and values encoded into their own writers. */
typedef struct gbatch {
    kp_batch_builder bb;
    int64_t ts;
    int32_t n;
    kp_err err;
} gbatch;

/* pid >= 0: a transactional batch of that producer (TxnOffsetCommit). */
static void gbatch_init(gbatch *gb, int64_t ts, int64_t pid, int16_t epoch)
{
    kp_batch_builder_init(&gb->bb, 0, pid >= 0 ? KP_BATCH_ATTR_TRANSACTIONAL : 0, pid, epoch, -1);
    gb->ts = ts;
    gb->n = 0;
    gb->err = KP_ERR_NONE;
}

/* Adds key (and value, or a tombstone when value is NULL); frees both. */
static void gbatch_add(gbatch *gb, kp_writer *key, kp_writer *value)
{
    if (key->err != KP_ERR_NONE || (value != NULL && value->err != KP_ERR_NONE))
        gb->err = KP_ERR__NOMEM;
    else
        kp_batch_builder_add(&gb->bb, gb->ts, (kp_slice){key->buf, (int32_t)key->len},
                             value != NULL ? (kp_slice){value->buf, (int32_t)value->len}
                                           : (kp_slice){NULL, -1},
                             NULL, 0);
    gb->n++;
    kp_writer_fini(key);
    if (value != NULL)
        kp_writer_fini(value);
}

static kp_err gbatch_append(kb_broker *b, const kb_group *g, gbatch *gb)
{
    kb_topic *t;
    kp_err e = gb->err != KP_ERR_NONE ? gb->err : kb_group_coord_offsets_topic(b, &t);
    if (e != KP_ERR_NONE || gb->n == 0) {
        kp_batch_builder_fini(&gb->bb);
        return e;
    }
    size_t len;
    uint8_t *buf = kp_batch_builder_finish(&gb->bb, &len);
    kp_batch_builder_fini(&gb->bb);
    if (buf == NULL)
        return KP_ERR__NOMEM;
    ks_append_result res;
    int32_t p = kb_offsets_partition_for(kp_str_from(g->id), t->npartitions);
    e = kb_partition_log_append(b, t, p, buf, len, &res);
    free(buf);
    if (e == KP_ERR_NONE)
        kb_partition_log_appended(b, t, p);
    else
        KB_LOG(KB_LL_WARN, KB_SUB_GROUP,
               "msg=\"cannot write to __consumer_offsets\" group=%s partition=%d error=%s", g->id,
               p, kp_err_name(e));
    return e;
}

static void add_commit(gbatch *gb, const kb_group *g, const kb_offset *o, bool tombstone)
{
    kp_writer k, v;
    kp_writer_init(&k, 64);
    kb_offsets_write_commit_key(&k, kp_str_from(g->id), kp_str_from(o->topic), o->partition);
    if (!tombstone) {
        kp_writer_init(&v, 64);
        kb_offsets_write_commit_value(&v, o);
    }
    gbatch_add(gb, &k, tombstone ? NULL : &v);
}

static void add_group(gbatch *gb, const kb_group *g, bool tombstone)
{
    kp_writer k, v;
    kp_writer_init(&k, 64);
    kb_offsets_write_group_key(&k, kp_str_from(g->id));
    if (tombstone)
        return gbatch_add(gb, &k, NULL);
    kp_arena a;
    kp_arena_init(&a);
    kp_group_metadata_value val;
    kp_writer_init(&v, 256);
    if (kb_group_to_record(g, &a, &val) == KP_ERR_NONE)
        kb_offsets_write_group_value(&v, &val);
    else
        v.err = KP_ERR__NOMEM;
    gbatch_add(gb, &k, &v);
    kp_arena_fini(&a);
}

static kp_err env_store(kb_group *g, void *ctx)
{
    kb_group_coord *c = ctx;
    gbatch gb;
    gbatch_init(&gb, kb_group_coord_wall(c->b), -1, -1);
    add_group(&gb, g, false);
    kp_err e = gbatch_append(c->b, g, &gb);
    if (e == KP_ERR_NONE)
        g->persisted = true;
    return e == KP_ERR_NONE ? KP_ERR_NONE : KP_ERR_COORDINATOR_NOT_AVAILABLE;
}

static void cg_emit(void *arg, kp_writer *key, kp_writer *value)
{
    gbatch_add(arg, key, value);
}

/* Writes what changed in a KIP-848 group since its last records (after
 * the event that changed it: see invariant 1). A failed write is retried
 * after the next event. */
static void store_cgroup(kb_broker *b, kb_group *g)
{
    gbatch gb;
    gbatch_init(&gb, kb_group_coord_wall(b), -1, -1);
    if (kb_consumer_group_rec_changes(g->cg, kp_str_from(g->id), cg_emit, &gb) != KP_ERR_NONE)
        gb.err = KP_ERR__NOMEM;
    bool any = gb.n > 0;
    if (gbatch_append(b, g, &gb) == KP_ERR_NONE && any)
        kb_consumer_group_rec_written(g->cg);
}

static void txn_offsets_forget(kb_group_coord *c, kp_str group, kp_str topic, int32_t partition);

/* Writes commits (or their tombstones), then changes the map to match. A
 * tombstone also ends what open transactions hold for that partition, as
 * Kafka's replay of one does. */
static kp_err write_offsets(kb_broker *b, kb_group *g, const kb_offset *offs, int32_t n,
                            bool tombstones)
{
    gbatch gb;
    gbatch_init(&gb, kb_group_coord_wall(b), -1, -1);
    for (int32_t i = 0; i < n; i++)
        add_commit(&gb, g, &offs[i], tombstones);
    kp_err e = gbatch_append(b, g, &gb);
    for (int32_t i = 0; e == KP_ERR_NONE && i < n; i++) {
        kp_str topic = kp_str_from(offs[i].topic);
        if (tombstones) {
            kb_offset_map_del(&g->offsets, topic, offs[i].partition);
            txn_offsets_forget(b->group_coord, kp_str_from(g->id), topic, offs[i].partition);
        } else {
            e = kb_offset_map_put(&g->offsets, &offs[i]);
        }
    }
    if (e == KP_ERR_NONE && !tombstones)
        kb_lag_committed(b, g, offs, n);
    return e;
}

kp_err kb_group_coord_commit(kb_broker *b, kb_group *g, const kb_offset *offs, int32_t n)
{
    return write_offsets(b, g, offs, n, false);
}

kp_err kb_group_coord_delete_offsets(kb_broker *b, kb_group *g, const kb_offset *offs, int32_t n)
{
    return write_offsets(b, g, offs, n, true);
}

void kb_group_coord_heartbeat_done(kb_broker *b, kb_group *g, bool created, int32_t nmembers)
{
    if (created && nmembers == 0 && kb_offset_map_count(&g->offsets) == 0)
        kb_groups_remove(b->group_coord->groups, g);
    else
        kb_group_coord_touch(b, g);
}

kp_err kb_group_coord_heartbeat_group(kb_broker *b, kp_str id, bool join, const kb_group_kind *k,
                                      kp_arena *a, kb_group **out, bool *created,
                                      const char **msg)
{
    kb_groups *gs = b->group_coord->groups;
    kb_group *g = kb_groups_find(gs, id);
    *created = false;
    *out = g;
    if (g != NULL && k->is(g))
        return KP_ERR_NONE;
    if (g != NULL && (g->cg != NULL || g->sg != NULL || g->stg != NULL ||
                      g->state != KB_GS_EMPTY || (k->typeless && g->protocol_type != NULL))) {
        *msg = kp_arena_printf(a, "Group %.*s is not a %s group.", id.len, id.p, k->name);
        return KP_ERR_GROUP_ID_NOT_FOUND;
    }
    if (g == NULL && !join) {
        *msg = kp_arena_printf(a, "%c%s group %.*s not found.", k->name[0] - ('a' - 'A'),
                               k->name + 1, id.len, id.p);
        return KP_ERR_GROUP_ID_NOT_FOUND;
    }
    if (g == NULL) {
        if (kb_groups_get(gs, id, &g) != KP_ERR_NONE)
            return KP_ERR__NOMEM;
        *created = true;
    }
    if (!k->make(g)) {
        if (*created)
            kb_groups_remove(gs, g);
        return KP_ERR__NOMEM;
    }
    *out = g;
    return KP_ERR_NONE;
}

kp_err kb_group_coord_delete_group(kb_broker *b, kb_group *g)
{
    kp_err e = g->sg != NULL ? kb_share_coord_delete_topic(b, g, NULL) : KP_ERR_NONE;
    if (e != KP_ERR_NONE)
        return e;
    gbatch gb;
    gbatch_init(&gb, kb_group_coord_wall(b), -1, -1);
    size_t cur = 0;
    for (const kb_offset *o; (o = kb_offset_map_next(&g->offsets, &cur)) != NULL;)
        add_commit(&gb, g, o, true);
    add_group(&gb, g, true);
    if (g->cg != NULL)
        kb_consumer_group_rec_delete(g->cg, kp_str_from(g->id), cg_emit, &gb);
    e = gbatch_append(b, g, &gb);
    if (e != KP_ERR_NONE)
        return e;
    kb_timer_disarm(b->loop, &g->timer);
    KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"group deleted\" group=%s", g->id);
    kb_groups_remove(b->group_coord->groups, g);
    return KP_ERR_NONE;
}

/* The partitions of topic that g has an offset for, committed or held by an
 * open transaction, each once, into out (room for all); their count. */
static int32_t offsets_of_topic(const kb_group_coord *c, const kb_group *g, char *topic,
                                kb_offset *out)
{
    kp_str name = kp_str_from(topic);
    int32_t n = 0;
    size_t cur = 0;
    for (const kb_offset *o; (o = kb_offset_map_next(&g->offsets, &cur)) != NULL;)
        if (kp_str_eq_c(name, o->topic))
            out[n++] = (kb_offset){.topic = topic, .partition = o->partition};
    for (const txn_offset *x = c->pending; x != NULL; x = x->next) {
        if (strcmp(x->group, g->id) != 0 || !kp_str_eq_c(name, x->o.topic))
            continue;
        int32_t i = 0;
        while (i < n && out[i].partition != x->o.partition)
            i++;
        if (i == n)
            out[n++] = (kb_offset){.topic = topic, .partition = x->o.partition};
    }
    return n;
}

void kb_group_coord_topic_deleted(kb_broker *b, kp_str topic)
{
    kb_group_coord *c = b->group_coord;
    char *name = topic.len > 0 ? strndup(topic.p, (size_t)topic.len) : NULL;
    size_t cur = 0;
    for (kb_group *g; name != NULL && (g = kb_groups_next(c->groups, &cur)) != NULL;) {
        kb_offset *dead = calloc(kb_offset_map_count(&g->offsets) + c->npending + 1, sizeof(*dead));
        int32_t n = dead != NULL ? offsets_of_topic(c, g, name, dead) : 0;
        if (dead == NULL || (n > 0 && write_offsets(b, g, dead, n, true) != KP_ERR_NONE))
            KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"cannot delete the offsets of a deleted "
                   "topic\" group=%s topic=%s", g->id, name);
        free(dead);
    }
    if (name == NULL && topic.len > 0)
        KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"out of memory deleting the offsets of a "
               "deleted topic\"");
    free(name);
}

/* ---- transactional offsets ---------------------------------------------- */

static void txn_offset_free(txn_offset *x)
{
    free(x->group);
    free(x->o.topic);
    free(x->o.metadata);
    free(x);
}

static bool txn_offset_is(const txn_offset *x, int64_t pid, kp_str group, kp_str topic,
                          int32_t partition)
{
    return (pid < 0 || x->producer_id == pid) && x->o.partition == partition &&
           kp_str_eq_c(group, x->group) && kp_str_eq_c(topic, x->o.topic);
}

/* Holds o (copied) for group until pid's marker on partition p. */
static kp_err txn_offset_add(kb_group_coord *c, int64_t pid, int32_t p, kp_str group,
                             const kb_offset *o)
{
    kp_str topic = kp_str_from(o->topic);
    txn_offset *x = c->pending;
    while (x != NULL && !txn_offset_is(x, pid, group, topic, o->partition))
        x = x->next;
    if (x == NULL && c->npending >= TXN_OFFSETS_MAX)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    char *meta = kb_offset_metadata_dup(o);
    if (meta == NULL)
        return KP_ERR__NOMEM;
    if (x == NULL) {
        x = calloc(1, sizeof(*x));
        if (x == NULL || (x->group = strndup(group.p, (size_t)group.len)) == NULL ||
            (x->o.topic = strdup(o->topic)) == NULL) {
            free(meta);
            if (x != NULL)
                txn_offset_free(x);
            return KP_ERR__NOMEM;
        }
        x->next = c->pending;
        c->pending = x;
        c->npending++;
    }
    char *topic_copy = x->o.topic;
    free(x->o.metadata);
    x->o = *o;
    x->o.topic = topic_copy;
    x->o.metadata = meta;
    x->o.metadata_len = kb_offset_metadata(o).len;
    x->producer_id = pid;
    x->partition = p;
    return KP_ERR_NONE;
}

/* Applies (commit) or drops the offsets pid holds on partition p. */
static kp_err txn_offsets_end(kb_group_coord *c, int64_t pid, int32_t p, bool commit)
{
    kp_err err = KP_ERR_NONE;
    for (txn_offset **xp = &c->pending; *xp != NULL;) {
        txn_offset *x = *xp;
        if (x->producer_id != pid || x->partition != p) {
            xp = &x->next;
            continue;
        }
        kb_group *g = NULL;
        if (commit && kb_groups_get(c->groups, kp_str_from(x->group), &g) == KP_ERR_NONE) {
            kp_err e = kb_offset_map_put(&g->offsets, &x->o);
            err = e != KP_ERR_NONE ? e : err;
            if (e == KP_ERR_NONE)
                kb_lag_committed(c->b, g, &x->o, 1); /* a transactional commit counts too */
        }
        *xp = x->next;
        c->npending--;
        txn_offset_free(x);
    }
    return err;
}

/* Drops every offset an open transaction holds for (group, topic, partition). */
static void txn_offsets_forget(kb_group_coord *c, kp_str group, kp_str topic, int32_t partition)
{
    for (txn_offset **xp = &c->pending; *xp != NULL;) {
        txn_offset *x = *xp;
        if (!txn_offset_is(x, -1, group, topic, partition)) {
            xp = &x->next;
            continue;
        }
        *xp = x->next;
        c->npending--;
        txn_offset_free(x);
    }
}

kp_err kb_group_coord_txn_commit(kb_broker *b, kb_group *g, int64_t pid, int16_t epoch,
                            const kb_offset *offs, int32_t n)
{
    kb_group_coord *c = b->group_coord;
    if (c->npending + (size_t)n > TXN_OFFSETS_MAX)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    gbatch gb;
    gbatch_init(&gb, kb_group_coord_wall(b), pid, epoch);
    for (int32_t i = 0; i < n; i++)
        add_commit(&gb, g, &offs[i], false);
    kp_err e = gbatch_append(b, g, &gb);
    kb_topic *t;
    if (e != KP_ERR_NONE || kb_group_coord_offsets_topic(b, &t) != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    int32_t p = kb_offsets_partition_for(kp_str_from(g->id), t->npartitions);
    for (int32_t i = 0; e == KP_ERR_NONE && i < n; i++)
        e = txn_offset_add(c, pid, p, kp_str_from(g->id), &offs[i]);
    return e;
}

void kb_group_coord_txn_end(kb_broker *b, int64_t pid, int32_t partition, bool commit)
{
    if (txn_offsets_end(b->group_coord, pid, partition, commit) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"out of memory applying transactional offsets\" "
               "producer_id=%lld", (long long)pid);
}

bool kb_group_coord_txn_pending(kb_broker *b, kp_str group, kp_str topic, int32_t partition)
{
    for (const txn_offset *x = b->group_coord->pending; x != NULL; x = x->next)
        if (txn_offset_is(x, -1, group, topic, partition))
            return true;
    return false;
}

/* ---- timers ------------------------------------------------------------- */

static void on_group_timer(kb_loop *loop, void *arg)
{
    kb_group *g = arg;
    kb_group_coord *c = g->host;
    kb_consumer_group_env env;
    if (g->cg != NULL) {
        kb_group_coord_cgroup_env_for(c->b, g, &env);
        kb_consumer_group_tick(g->cg, &env, kb_loop_now_ms(loop));
    } else if (g->sg != NULL) {
        share_tick(c->b, g, kb_loop_now_ms(loop));
    } else if (g->stg != NULL) {
        kb_streams_group_env senv;
        kb_streams_coord_env_for(c->b, g, &senv);
        kb_streams_group_tick(g->stg, &senv, kb_loop_now_ms(loop));
    } else
        kb_group_tick(c->groups, g, kb_loop_now_ms(loop));
    kb_group_coord_touch(c->b, g);
}

void kb_group_coord_touch(kb_broker *b, kb_group *g)
{
    if (g->cg != NULL)
        store_cgroup(b, g);
    else if (g->sg != NULL)
        kb_share_coord_flush(b, g);
    g->host = b->group_coord;
    g->timer.cb = on_group_timer;
    g->timer.arg = g;
    int64_t d = g->cg != NULL   ? kb_consumer_group_next_deadline(g->cg)
                : g->sg != NULL ? share_deadline(g->sg)
                : g->stg != NULL ? kb_streams_group_next_deadline(g->stg)
                                : kb_group_next_deadline(g);
    if (d == KB_GROUP_NO_DEADLINE) {
        kb_timer_disarm(b->loop, &g->timer);
        return;
    }
    int64_t ms = d - kb_loop_now_ms(b->loop);
    if (kb_timer_arm(b->loop, &g->timer, ms > 0 ? ms : 0) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"cannot arm group timer\" group=%s", g->id);
}

/* Kafka's offset expiration: an EMPTY group's offsets once the retention
 * passed since it became empty; a simple group's (no protocol type) since
 * each commit; an explicit expire timestamp wins. */
static bool offset_expired(const kb_group *g, const kb_offset *o, int64_t now, int64_t retention)
{
    if (o->expire_ts >= 0)
        return now >= o->expire_ts;
    int64_t base = g->protocol_type != NULL && g->state_timestamp > 0 ? g->state_timestamp
                                                                       : o->commit_ts;
    return now - base >= retention;
}

static void expire_group(kb_group_coord *c, kb_group *g, int64_t now, int64_t retention)
{
    /* a share group's state stays until deleted, as Kafka keeps it */
    if (g->state != KB_GS_EMPTY || g->npending > 0 || (g->cg != NULL && g->cg->nmembers > 0) ||
        (g->sg != NULL && (g->sg->nmembers > 0 || kb_share_parts_count(g->sg->parts) > 0)) ||
        (g->stg != NULL && g->stg->nmembers > 0))
        return;
    kb_offset *dead = calloc(kb_offset_map_count(&g->offsets) + 1, sizeof(*dead));
    if (dead == NULL)
        return;
    int32_t n = 0;
    size_t cur = 0;
    for (const kb_offset *o; (o = kb_offset_map_next(&g->offsets, &cur)) != NULL;)
        if (offset_expired(g, o, now, retention))
            dead[n++] = *o;
    bool all = (size_t)n == kb_offset_map_count(&g->offsets);
    if (all) {
        free(dead);
        KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"offsets expired; group removed\" group=%s", g->id);
        kb_group_coord_delete_group(c->b, g);
        return;
    }
    if (n > 0)
        kb_group_coord_delete_offsets(c->b, g, dead, n);
    free(dead);
}

static void on_expiry_timer(kb_loop *loop, void *arg)
{
    kb_group_coord *c = arg;
    int64_t now = kb_group_coord_wall(c->b);
    int64_t retention = (int64_t)c->b->cfg->offsets_retention_minutes * 60000;
    kb_group **all = calloc(kb_groups_count(c->groups) + 1, sizeof(*all));
    size_t n = 0, cur = 0;
    for (kb_group *g; all != NULL && (g = kb_groups_next(c->groups, &cur)) != NULL;)
        all[n++] = g;
    for (size_t i = 0; i < n; i++)
        expire_group(c, all[i], now, retention);
    free(all);
    kb_timer_arm(loop, &c->expiry, EXPIRY_INTERVAL_MS);
}

/* ---- rebuilding from __consumer_offsets --------------------------------- */

typedef struct loader {
    kb_group_coord *c;
    int64_t now;
    int64_t records;
    int64_t skipped;
    int32_t partition;   /* of __consumer_offsets being read */
    int64_t producer_id; /* of a transactional batch, else -1 */
} loader;

/* The offset a commit record holds (topic copied into a). */
static kp_err read_commit(const kb_offsets_key *k, kp_slice value, kp_arena *a, kb_offset *o)
{
    kp_err e = kb_offsets_read_commit_value(value, a, o);
    if (e != KP_ERR_NONE)
        return e;
    o->topic = kp_arena_strdup(a, k->topic.p, (size_t)k->topic.len);
    o->partition = k->partition;
    return o->topic != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
}

/* A commit inside a transaction: held until the producer's marker. */
static kp_err load_txn_commit(loader *ld, const kb_offsets_key *k, kp_slice value, kp_arena *a)
{
    kb_offset o;
    kp_err e = value.len < 0 ? KP_ERR__CORRUPT : read_commit(k, value, a, &o);
    if (e != KP_ERR_NONE)
        return e;
    return txn_offset_add(ld->c, ld->producer_id, ld->partition, k->group, &o);
}

static kp_err load_commit(loader *ld, const kb_offsets_key *k, kp_slice value, kp_arena *a)
{
    kb_group *g = kb_groups_find(ld->c->groups, k->group);
    if (value.len < 0) {
        if (g != NULL)
            kb_offset_map_del(&g->offsets, k->topic, k->partition);
        txn_offsets_forget(ld->c, k->group, k->topic, k->partition);
        return KP_ERR_NONE;
    }
    kb_offset o;
    kp_err e = read_commit(k, value, a, &o);
    if (e != KP_ERR_NONE)
        return e;
    if (g == NULL && (e = kb_groups_get(ld->c->groups, k->group, &g)) != KP_ERR_NONE)
        return e;
    return kb_offset_map_put(&g->offsets, &o);
}

static kp_err load_group(loader *ld, const kb_offsets_key *k, kp_slice value, kp_arena *a)
{
    kb_group *g;
    kp_group_metadata_value v;
    kp_group_metadata_value_defaults(&v);
    kp_err e = value.len < 0 ? KP_ERR_NONE : kb_offsets_read_group_value(value, a, &v);
    if (e != KP_ERR_NONE)
        return e;
    if (value.len < 0) {
        v.protocol_type = KP_STR_LIT("");
        v.protocol = KP_STR_NULL;
        v.leader = KP_STR_NULL;
        if (kb_groups_find(ld->c->groups, k->group) == NULL)
            return KP_ERR_NONE;
    }
    if ((e = kb_groups_get(ld->c->groups, k->group, &g)) != KP_ERR_NONE)
        return e;
    g->persisted = value.len >= 0;
    kb_consumer_group_free(g->cg); /* the later record wins: a classic group now */
    g->cg = NULL;
    return kb_group_from_record(g, &v, ld->now);
}

/* A KIP-848 group record: the group (and its consumer part) comes into
 * being at its first record; a ConsumerGroupMetadata tombstone ends it. */
static kp_err load_cgroup(loader *ld, const kb_offsets_key *k, kp_slice value, kp_arena *a)
{
    kb_group *g = kb_groups_find(ld->c->groups, k->group);
    if (value.len < 0 && k->cg_type == KB_OFFSETS_CGROUP_KEY_VERSION) {
        if (g != NULL) {
            kb_consumer_group_free(g->cg);
            g->cg = NULL;
        }
        return KP_ERR_NONE;
    }
    if (value.len < 0 && (g == NULL || g->cg == NULL))
        return KP_ERR_NONE;
    kp_err e = g == NULL ? kb_groups_get(ld->c->groups, k->group, &g) : KP_ERR_NONE;
    if (e == KP_ERR_NONE && g->cg == NULL && (g->cg = kb_consumer_group_new()) == NULL)
        e = KP_ERR__NOMEM;
    return e == KP_ERR_NONE ? kb_consumer_group_rec_load(g->cg, k, value, a) : e;
}

static kp_err load_record(void *arg, const kp_record *rec, kp_arena *a)
{
    loader *ld = arg;
    kb_offsets_key k;
    kp_err e = kb_offsets_read_key(rec->key, a, &k);
    if (e == KP_ERR__NOENT)
        return KP_ERR_NONE;
    if (e == KP_ERR_NONE && ld->producer_id >= 0)
        e = k.type == KB_OFFSETS_KEY_COMMIT ? load_txn_commit(ld, &k, rec->value, a)
                                            : KP_ERR__CORRUPT;
    else if (e == KP_ERR_NONE && k.type == KB_OFFSETS_KEY_CGROUP)
        e = load_cgroup(ld, &k, rec->value, a);
    else if (e == KP_ERR_NONE)
        e = k.type == KB_OFFSETS_KEY_COMMIT ? load_commit(ld, &k, rec->value, a)
                                            : load_group(ld, &k, rec->value, a);
    if (e == KP_ERR__NOMEM)
        return e;
    if (e != KP_ERR_NONE)
        ld->skipped++;
    ld->records++;
    return KP_ERR_NONE;
}

static kp_err load_batch(void *arg, const kp_batch_hdr *h, const uint8_t *batch, size_t len)
{
    loader *ld = arg;
    int16_t type;
    if (batch != NULL && (h->attributes & KP_BATCH_ATTR_CONTROL)) {
        if (kb_partition_txn_control_type(batch, len, &type) == KP_ERR_NONE &&
            (type == KB_CONTROL_COMMIT || type == KB_CONTROL_ABORT))
            return txn_offsets_end(ld->c, h->producer_id, ld->partition,
                                   type == KB_CONTROL_COMMIT);
        return KP_ERR_NONE;
    }
    if (batch == NULL || (h->attributes & KP_BATCH_ATTR_CODEC_MASK) != 0) {
        ld->skipped += h->records_count;
        return KP_ERR_NONE;
    }
    ld->producer_id = (h->attributes & KP_BATCH_ATTR_TRANSACTIONAL) ? h->producer_id : -1;
    return kb_batch_each_record(h, batch, len, load_record, ld);
}

/* The partition of __consumer_offsets that holds group id (-1: no topic). */
static int32_t partition_of(const kb_group_coord *c, const char *id)
{
    kb_topic *t = kb_topics_find(c->b->topics, KP_STR_LIT(KB_GROUP_COORD_OFFSETS_TOPIC));
    return t != NULL ? kb_offsets_partition_for(kp_str_from(id), t->npartitions) : -1;
}

/* Drops groups the log left with nothing; arms the timers of the rest
 * (only the groups of partition only, when only >= 0). */
static void load_finish(kb_group_coord *c, int32_t only)
{
    int64_t now = kb_loop_now_ms(c->b->loop);
    size_t cur = 0;
    kb_group *g;
    kb_consumer_group_env env;
    while ((g = kb_groups_next(c->groups, &cur)) != NULL) {
        if (only >= 0 && partition_of(c, g->id) != only)
            continue;
        if (g->cg != NULL)
            kb_group_coord_cgroup_env_for(c->b, g, &env);
        if (g->nmembers == 0 && !g->persisted && kb_offset_map_count(&g->offsets) == 0 && g->cg == NULL)
            kb_groups_remove(c->groups, g);
        else if (g->cg != NULL && kb_consumer_group_restored(g->cg, &env, now) != KP_ERR_NONE)
            KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"out of memory restoring group\" group=%s",
                   g->id);
        else
            kb_group_coord_touch(c->b, g);
    }
}

static kp_err load_all(kb_group_coord *c, char *err, size_t errlen)
{
    kb_broker *b = c->b;
    kb_topic *t = kb_topics_find(b->topics, KP_STR_LIT(KB_GROUP_COORD_OFFSETS_TOPIC));
    if (t == NULL)
        return KP_ERR_NONE;
    loader ld = {.c = c, .now = kb_loop_now_ms(b->loop)};
    for (int32_t p = 0; p < t->npartitions; p++) {
        ks_log *log;
        ld.partition = p;
        kp_err e = kb_partition_log_get(b, t, p, &log);
        if (e == KP_ERR_NONE)
            e = kb_log_scan_batches(kb_partition_log_io(b), log, LOAD_BATCH_MAX, load_batch, &ld);
        if (e != KP_ERR_NONE) {
            snprintf(err, errlen, "cannot load %s-%d: %s", KB_GROUP_COORD_OFFSETS_TOPIC, p,
                     kp_err_name(e));
            return KP_ERR__IO;
        }
    }
    load_finish(c, -1);
    KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"groups loaded\" groups=%zu records=%lld skipped=%lld",
           kb_groups_count(c->groups), (long long)ld.records, (long long)ld.skipped);
    return KP_ERR_NONE;
}

/* ---- cluster mode: partitions that move ------------------------------- */

/* Drops the groups of partition p and what open transactions hold there:
 * another broker coordinates them now (parked joins and syncs answer
 * NOT_COORDINATOR). */
static void unload_partition(void *arg, int32_t p)
{
    kb_group_coord *c = arg;
    size_t cur = 0, n = 0;
    kb_group **mine = calloc(kb_groups_count(c->groups) + 1, sizeof(*mine));
    for (kb_group *g; mine != NULL && (g = kb_groups_next(c->groups, &cur)) != NULL;)
        if (partition_of(c, g->id) == p)
            mine[n++] = g;
    for (size_t i = 0; i < n; i++) {
        kb_timer_disarm(c->b->loop, &mine[i]->timer);
        kb_groups_unload(c->groups, mine[i], KP_ERR_NOT_COORDINATOR);
    }
    free(mine);
    for (txn_offset **xp = &c->pending; *xp != NULL;) {
        txn_offset *x = *xp;
        if (x->partition != p) {
            xp = &x->next;
            continue;
        }
        *xp = x->next;
        c->npending--;
        txn_offset_free(x);
    }
    KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"groups unloaded\" partition=%d groups=%zu", p, n);
}

static void *load_begin(void *arg, int32_t p)
{
    kb_group_coord *c = arg;
    loader *ld = calloc(1, sizeof(*ld));
    if (ld != NULL)
        *ld = (loader){.c = c, .now = kb_loop_now_ms(c->b->loop), .partition = p,
                       .producer_id = -1};
    return ld;
}

static void load_end(void *arg, void *state, int32_t p, kp_err err)
{
    kb_group_coord *c = arg;
    if (err == KP_ERR_NONE)
        load_finish(c, p);
    else
        unload_partition(c, p);
    free(state);
}

kb_coord_parts *kb_group_coord_parts(kb_broker *b)
{
    kb_group_coord *c = b->group_coord;
    return c != NULL && c->cluster ? &c->parts : NULL;
}

/* ---- start and stop ----------------------------------------------------- */

kp_err kb_group_coord_start(kb_broker *b, char *err, size_t errlen)
{
    kb_group_coord *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return KP_ERR__NOMEM;
    }
    const kb_config *cfg = b->cfg;
    kb_group_env env = {
        .join_done = env_join_done,
        .sync_done = env_sync_done,
        .store = env_store,
        .uuid = env_uuid,
        .wall_ms = env_wall,
        .ctx = c,
        .initial_rebalance_delay_ms = cfg->group_initial_rebalance_delay_ms,
        .min_session_timeout_ms = cfg->group_min_session_timeout_ms,
        .max_session_timeout_ms = cfg->group_max_session_timeout_ms,
        .max_size = cfg->group_max_size,
    };
    c->b = b;
    cenv_init(c, cfg);
    c->groups = kb_groups_new(&env);
    b->group_coord = c;
    if (c->groups == NULL) {
        snprintf(err, errlen, "out of memory");
        return KP_ERR__NOMEM;
    }
    kb_timer_init(&c->expiry, on_expiry_timer, c);
    kb_timer_arm(b->loop, &c->expiry, EXPIRY_INTERVAL_MS);
    if (kb_lag_start(b, &c->lag) != KP_ERR_NONE) {
        snprintf(err, errlen, "out of memory");
        return KP_ERR__NOMEM;
    }
    if (!kb_config_cluster_mode(cfg))
        return load_all(c, err, errlen);
    /* cluster mode: the groups of a partition load when this broker leads it */
    c->cluster = true;
    c->parts = (kb_coord_parts){.b = b, .topic = KB_GROUP_COORD_OFFSETS_TOPIC,
                                .max_batch = LOAD_BATCH_MAX, .begin = load_begin,
                                .batch = load_batch, .loaded = load_end,
                                .unload = unload_partition, .arg = c};
    return KP_ERR_NONE;
}

void kb_group_coord_stop(kb_broker *b)
{
    kb_group_coord *c = b->group_coord;
    if (c == NULL)
        return;
    size_t cur = 0;
    for (kb_group *g; c->groups != NULL && (g = kb_groups_next(c->groups, &cur)) != NULL;)
        kb_timer_disarm(b->loop, &g->timer);
    kb_timer_disarm(b->loop, &c->expiry);
    kb_coord_parts_fini(&c->parts);
    kb_lag_stop(b, c->lag);
    while (c->pending != NULL) {
        txn_offset *x = c->pending;
        c->pending = x->next;
        txn_offset_free(x);
    }
    kb_groups_free(c->groups);
    free(c);
    b->group_coord = NULL;
}
