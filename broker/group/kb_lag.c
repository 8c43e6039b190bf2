#include "kb_lag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_config.h"
#include "kb_consumer_group.h"
#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_map.h"
#include "kb_retention_guard.h"
#include "kb_topics.h"

#define TICK_MAX_ENTRIES 20000 /* windows re-judged per tick, at most */
#define OOR_SEEN_SLOTS   8192  /* out-of-range lines remembered (invariant 4) */

/* One tracked (group, topic, partition). */
typedef struct lag_entry {
    uint64_t hash;
    char *group;
    char *topic;
    int32_t partition;
    kb_lag_window w;
    kb_lag_status status; /* as last logged */
} lag_entry;

typedef struct lag_key {
    kp_str group;
    kp_str topic;
    int32_t partition;
} lag_key;

struct kb_lag {
    kb_broker *b;
    kb_map entries; /* lag_entry *, owned */
    size_t cursor;  /* where the next tick goes on */
    kb_timer tick;
    uint64_t untracked;
    uint64_t oor_seen[OOR_SEEN_SLOTS]; /* hashes; 0 free */
    size_t noor_seen;
};

static uint64_t key_hash(const lag_key *k)
{
    uint64_t h = kb_map_hash_more(kb_map_hash_str(k->group), k->topic.p, (size_t)k->topic.len);
    return kb_map_hash_more(h, &k->partition, sizeof k->partition);
}

static bool entry_is(const void *entry, const void *key)
{
    const lag_entry *e = entry;
    const lag_key *k = key;
    return e->partition == k->partition && kp_str_eq_c(k->group, e->group) &&
           kp_str_eq_c(k->topic, e->topic);
}

static lag_entry *entry_find(const kb_lag *L, const lag_key *k)
{
    return kb_map_find(&L->entries, key_hash(k), k, entry_is);
}

static void entry_free(lag_entry *e)
{
    kb_lag_window_fini(&e->w);
    free(e->group);
    free(e->topic);
    free(e);
}

static lag_entry *entry_get(kb_lag *L, const lag_key *k)
{
    lag_entry *e = entry_find(L, k);
    if (e != NULL)
        return e;
    if (kb_map_count(&L->entries) >= KB_LAG_MAX_TRACKED) {
        L->untracked++;
        return NULL;
    }
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->hash = key_hash(k);
    e->group = strndup(k->group.p, (size_t)k->group.len);
    e->topic = strndup(k->topic.p, (size_t)k->topic.len);
    e->partition = k->partition;
    if (e->group == NULL || e->topic == NULL ||
        kb_lag_window_init(&e->w, L->b->cfg->lag_window_commits) != KP_ERR_NONE ||
        kb_map_insert(&L->entries, e->hash, e) != KP_ERR_NONE) {
        entry_free(e);
        return NULL;
    }
    return e;
}

static kb_lag *lag_of(kb_broker *b)
{
    return b->group_coord != NULL ? kb_group_coord_lag(b) : NULL;
}

/* ---- one partition's figures -------------------------------------------- */

static int64_t wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The partition's log if online; never opens one (no I/O on the loop). */
static ks_log *online_log(kb_broker *b, const char *topic, int32_t partition)
{
    kb_topic *t = kb_topics_find(b->topics, kp_str_from(topic));
    if (t == NULL || t->state != KB_TOPIC_READY || partition < 0 || partition >= t->npartitions)
        return NULL;
    return t->partitions[partition].log;
}

static void row_fill(kb_lag *L, const kb_group *g, const kb_offset *o, int64_t wall,
                     kb_lag_row *r)
{
    *r = (kb_lag_row){g->id, o->topic, o->partition, o->offset, o->commit_ts, -1, -1, -1, KB_LAG_OK};
    ks_log *log = online_log(L->b, o->topic, o->partition);
    if (log == NULL)
        return;
    r->log_end = ks_log_high_watermark(log);
    r->lag = r->log_end > o->offset ? r->log_end - o->offset : 0;
    if (r->lag == 0) {
        r->lag_ms = 0;
    } else {
        int64_t start = ks_log_start_offset(log);
        int64_t ts = ks_log_time_near(log, o->offset > start ? o->offset : start);
        r->lag_ms = ts < 0 ? -1 : wall > ts ? wall - ts : 0;
    }
    lag_key k = {kp_str_from(g->id), kp_str_from(o->topic), o->partition};
    const lag_entry *e = entry_find(L, &k);
    if (e != NULL)
        r->status = kb_lag_evaluate(&e->w, kb_loop_now_ms(L->b->loop), r->lag,
                                    L->b->cfg->lag_window_min_stop_ms);
}

void kb_lag_committed(kb_broker *b, const kb_group *g, const kb_offset *offs, int32_t n)
{
    kb_lag *L = lag_of(b);
    for (int32_t i = 0; L != NULL && i < n; i++) {
        ks_log *log = online_log(b, offs[i].topic, offs[i].partition);
        lag_key k = {kp_str_from(g->id), kp_str_from(offs[i].topic), offs[i].partition};
        lag_entry *e = log != NULL ? entry_get(L, &k) : NULL;
        if (e != NULL)
            kb_lag_window_add(&e->w, kb_loop_now_ms(b->loop), offs[i].offset,
                              ks_log_high_watermark(log));
    }
}

/* ---- visiting ----------------------------------------------------------- */

static int32_t members_of(const kb_group *g)
{
    return g->cg != NULL ? g->cg->nmembers : g->nmembers;
}

/* Calls fn with a row for each committed offset of g. */
static void group_rows(kb_lag *L, const kb_group *g, int64_t wall, kb_lag_row_fn *fn, void *arg)
{
    size_t oc = 0;
    for (const kb_offset *o; (o = kb_offset_map_next(&g->offsets, &oc)) != NULL;) {
        kb_lag_row r;
        row_fill(L, g, o, wall, &r);
        fn(arg, &r);
    }
}

void kb_lag_each(kb_broker *b, kb_lag_row_fn *fn, void *arg)
{
    kb_lag *L = lag_of(b);
    int64_t wall = wall_now();
    size_t gc = 0;
    for (kb_group *g; L != NULL && (g = kb_groups_next(kb_group_coord_groups(b), &gc)) != NULL;)
        group_rows(L, g, wall, fn, arg);
}

static void fold_row(void *arg, const kb_lag_row *r)
{
    kb_lag_group_row *gr = arg;
    gr->partitions++;
    gr->lag += r->lag > 0 ? r->lag : 0;
    gr->status = kb_lag_group_fold(gr->status, r->status);
}

static void group_fold(kb_lag *L, const kb_group *g, int64_t wall, kb_lag_group_row *out)
{
    *out = (kb_lag_group_row){g->id, members_of(g), 0, 0, KB_LAG_GROUP_OK};
    group_rows(L, g, wall, fold_row, out);
}

void kb_lag_each_group(kb_broker *b, kb_lag_group_fn *fn, void *arg)
{
    kb_lag *L = lag_of(b);
    int64_t wall = wall_now();
    size_t gc = 0;
    for (kb_group *g; L != NULL && (g = kb_groups_next(kb_group_coord_groups(b), &gc)) != NULL;) {
        kb_lag_group_row gr;
        group_fold(L, g, wall, &gr);
        fn(arg, &gr);
    }
}

void kb_lag_each_of(kb_broker *b, const kb_group *g, kb_lag_row_fn *fn, void *arg)
{
    kb_lag *L = lag_of(b);
    if (L != NULL)
        group_rows(L, g, wall_now(), fn, arg);
}

void kb_lag_group_of(kb_broker *b, const kb_group *g, kb_lag_group_row *out)
{
    kb_lag *L = lag_of(b);
    if (L != NULL)
        group_fold(L, g, wall_now(), out);
    else
        *out = (kb_lag_group_row){g->id, members_of(g), 0, 0, KB_LAG_GROUP_OK};
}

uint64_t kb_lag_untracked(const kb_lag *lag)
{
    return lag->untracked;
}

/* ---- the periodic verdict ----------------------------------------------- */

/* Re-judges e; false when its group or offset is gone (then e goes). */
static bool entry_judge(kb_lag *L, lag_entry *e, int64_t wall)
{
    kb_group *g = kb_groups_find(kb_group_coord_groups(L->b), kp_str_from(e->group));
    const kb_offset *o =
        g != NULL ? kb_offset_map_get(&g->offsets, kp_str_from(e->topic), e->partition) : NULL;
    if (o == NULL)
        return false;
    kb_lag_row r;
    row_fill(L, g, o, wall, &r);
    if (r.status != e->status) {
        char esc[KB_LOG_ESC_SHORT];
        KB_LOG(KB_LL_INFO, KB_SUB_GROUP,
               "msg=\"lag status\" group=%s topic=%s partition=%d change=%s->%s lag=%lld "
               "lag_ms=%lld committed_offset=%lld",
               kb_log_escape(esc, sizeof esc, e->group, strlen(e->group)), e->topic,
               e->partition, kb_lag_status_name(e->status), kb_lag_status_name(r.status),
               (long long)r.lag, (long long)r.lag_ms, (long long)r.committed);
        e->status = r.status;
    }
    return true;
}

static void on_tick(kb_loop *loop, void *arg)
{
    kb_lag *L = arg;
    int64_t wall = wall_now();
    for (int32_t i = 0; i < TICK_MAX_ENTRIES; i++) {
        lag_entry *e = kb_map_next(&L->entries, &L->cursor);
        if (e == NULL) {
            L->cursor = 0;
            break;
        }
        if (!entry_judge(L, e, wall)) {
            kb_map_remove_entry(&L->entries, e->hash, e);
            entry_free(e);
        }
    }
    (void)kb_timer_arm(loop, &L->tick, L->b->cfg->lag_check_interval_ms);
}

/* ---- the retention guard's readers -------------------------------------- */

static void guard_readers(void *arg, const char *topic, int32_t partition, kb_guard_reader_cb *cb,
                          void *cb_arg)
{
    kb_broker *b = arg;
    kb_groups *gs = kb_group_coord_groups(b);
    size_t gc = 0;
    for (kb_group *g; (g = kb_groups_next(gs, &gc)) != NULL;) {
        const kb_offset *o = kb_offset_map_get(&g->offsets, kp_str_from(topic), partition);
        if (o != NULL)
            cb(cb_arg, g->id, o->offset);
    }
}

/* ---- out of range ------------------------------------------------------- */

static bool has_client(const kb_group *g, kp_str client_id)
{
    for (int32_t i = 0; g->cg == NULL && i < g->nmembers; i++)
        if (kp_str_eq_c(client_id, g->members[i]->client_id))
            return true;
    for (int32_t i = 0; g->cg != NULL && i < g->cg->nmembers; i++)
        if (kp_str_eq_c(client_id, g->cg->members[i]->client_id))
            return true;
    return false;
}

static const kb_group *oor_group(kb_broker *b, kp_str client_id, const char *topic,
                                 int32_t partition, int64_t offset)
{
    const kb_group *any = NULL;
    kb_groups *gs = kb_group_coord_groups(b);
    size_t gc = 0;
    for (kb_group *g; (g = kb_groups_next(gs, &gc)) != NULL;) {
        const kb_offset *o = kb_offset_map_get(&g->offsets, kp_str_from(topic), partition);
        if (o == NULL || o->offset != offset)
            continue;
        if (has_client(g, client_id))
            return g;
        any = any != NULL ? any : g;
    }
    return any;
}

/* Whether (who, topic, partition) was logged already; remembers it if not. */
static bool oor_seen(kb_lag *L, kp_str who, const char *topic, int32_t partition)
{
    lag_key k = {who, kp_str_from(topic), partition};
    uint64_t h = key_hash(&k) | 1;
    size_t i = h % OOR_SEEN_SLOTS;
    for (; L->oor_seen[i] != 0; i = (i + 1) % OOR_SEEN_SLOTS)
        if (L->oor_seen[i] == h)
            return true;
    if (L->noor_seen >= OOR_SEEN_SLOTS / 2) { /* invariant 4 */
        memset(L->oor_seen, 0, sizeof L->oor_seen);
        L->noor_seen = 0;
        i = h % OOR_SEEN_SLOTS;
    }
    L->oor_seen[i] = h;
    L->noor_seen++;
    return false;
}

void kb_lag_out_of_range(kb_broker *b, kp_str client_id, const char *topic, int32_t partition,
                         int64_t offset, int64_t log_start)
{
    kb_lag *L = lag_of(b);
    if (L == NULL)
        return;
    const kb_group *g = oor_group(b, client_id, topic, partition, offset);
    kp_str who = g != NULL ? kp_str_from(g->id) : client_id;
    if (oor_seen(L, who, topic, partition))
        return;
    char esc_who[KB_LOG_ESC_SHORT], esc_client[KB_LOG_ESC_SHORT];
    KB_LOG(KB_LL_WARN, KB_SUB_GROUP,
           "msg=\"fetch offset out of range: the consumer skips to its reset policy\" group=%s "
           "client_id=%s topic=%s partition=%d offset=%lld log_start_offset=%lld",
           g != NULL ? kb_log_escape(esc_who, sizeof esc_who, who.p, (size_t)who.len) : "-",
           kb_log_escape(esc_client, sizeof esc_client, client_id.p,
                         client_id.len > 0 ? (size_t)client_id.len : 0),
           topic, partition, (long long)offset, (long long)log_start);
}

/* ---- start and stop ----------------------------------------------------- */

kp_err kb_lag_start(kb_broker *b, kb_lag **out)
{
    kb_lag *L = calloc(1, sizeof(*L));
    if (L == NULL)
        return KP_ERR__NOMEM;
    L->b = b;
    kb_map_init(&L->entries);
    kb_timer_init(&L->tick, on_tick, L);
    (void)kb_timer_arm(b->loop, &L->tick, b->cfg->lag_check_interval_ms);
    kb_retention_guard *guard = kb_partition_log_guard(b);
    if (guard != NULL)
        kb_retention_guard_set_readers(guard, guard_readers, b);
    *out = L;
    return KP_ERR_NONE;
}

void kb_lag_stop(kb_broker *b, kb_lag *L)
{
    if (L == NULL)
        return;
    kb_retention_guard *guard = kb_partition_log_guard(b);
    if (guard != NULL)
        kb_retention_guard_set_readers(guard, NULL, NULL);
    kb_timer_disarm(b->loop, &L->tick);
    size_t cur = 0;
    for (lag_entry *e; (e = kb_map_next(&L->entries, &cur)) != NULL;)
        entry_free(e);
    kb_map_fini(&L->entries);
    free(L);
}
