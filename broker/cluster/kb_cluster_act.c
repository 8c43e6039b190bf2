#include "kb_cluster_act.h"

#include <stdlib.h>
#include <string.h>

#include "kb_coord_load.h"
#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_loop.h"
#include "kb_partition_dirs.h"
#include "kb_partition_log.h"
#include "kb_replica.h"
#include "kb_replica_fetch.h"
#include "kb_topics.h"
#include "kb_txn_coord.h"
#include "kb_uuid.h"

#define MAX_DIRTY 4096 /* topics gathered before the timer runs; more: all */

struct kb_cluster_act {
    kb_broker *b;
    kb_meta_image *img;
    int32_t node;
    kb_timer timer;
    kb_replica_fetch *fetch; /* this broker's replica fetchers */
    kb_replica_isr_fn *on_isr; /* proposes ISR changes (kb_alter_partition) */
    void *on_isr_arg;
    int ndirty;
    bool all_dirty;
    kp_uuid dirty[MAX_DIRTY];
};

bool kb_cluster_act_hosts(const kb_mi_topic *t, int32_t p, int32_t node)
{
    if (p < 0 || p >= t->n_parts || !t->parts[p].present)
        return false;
    for (int32_t i = 0; i < t->parts[p].replicas.n; i++)
        if (t->parts[p].replicas.v[i] == node)
            return true;
    return false;
}

static bool hosts_any(const kb_mi_topic *t, int32_t node)
{
    for (int32_t p = 0; p < t->n_parts; p++)
        if (kb_cluster_act_hosts(t, p, node))
            return true;
    return false;
}

static void id_text(const kp_uuid *id, char out[23])
{
    kb_uuid_format(id, out);
}

/* The image's configs of t as the registry's kind (borrowed strings). */
static kb_topic_config *configs_of(const kb_mi_topic *t)
{
    kb_topic_config *c = calloc((size_t)t->configs.n + 1, sizeof(*c));
    for (int i = 0; c != NULL && i < t->configs.n; i++)
        c[i] = (kb_topic_config){t->configs.v[i].name, t->configs.v[i].value};
    return c;
}

/* A partition of an internal topic: its coordinator loads its state when
 * this broker leads it, and drops it when it no longer does. */
static void move_coordinator(kb_cluster_act *a, const kb_mi_topic *t, int32_t p, bool leads)
{
    if (strcmp(t->name, KB_GROUP_COORD_OFFSETS_TOPIC) == 0)
        kb_coord_parts_move(kb_group_coord_parts(a->b), p, leads);
    else if (strcmp(t->name, KB_TXN_COORD_STATE_TOPIC) == 0)
        kb_coord_parts_move(kb_txn_coord_parts(a->b), p, leads);
}

/* Made leader by an unclean election (LeaderRecoveryState RECOVERING, a
 * leader from outside the ISR): one WARN line per election. Nothing is sent
 * for it: as Kafka's Partition.makeLeader, the leader takes itself as
 * recovered, and its next AlterPartition (the ISR growing back) carries
 * LeaderRecoveryState RECOVERED, which the controller commits. */
static void warn_unclean(const kb_topic *local, int32_t p, const kb_mi_partition *mp,
                         int32_t node)
{
    const kb_replica *r = local->partitions[p].repl;
    if (mp->leader != node || mp->leader_recovery_state != KB_MI_RECOVERING ||
        (kb_replica_is_leader(r) && r->leader_epoch == mp->leader_epoch))
        return;
    ks_log *log = local->partitions[p].log;
    KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"leader by an unclean election (from outside the "
           "ISR): records the previous leaders had past this replica's log end may be lost\" "
           "topic=%s partition=%d leader_epoch=%d log_end_offset=%lld", local->name, p,
           mp->leader_epoch, log != NULL ? (long long)ks_log_end_offset(log) : -1LL);
}

/* The local copy follows the image: leader epochs, the replication state
 * (leader, ISR), a fetcher for each partition another broker leads, and
 * the coordinators of internal topics their partitions' leadership. */
static void sync_partitions(kb_cluster_act *a, kb_topic *local, const kb_mi_topic *t)
{
    for (int32_t p = 0; p < local->npartitions && p < t->n_parts; p++) {
        const kb_mi_partition *mp = &t->parts[p];
        if (!mp->present)
            continue;
        local->partitions[p].leader_epoch = mp->leader_epoch;
        bool hosted = kb_cluster_act_hosts(t, p, a->node);
        if (hosted)
            warn_unclean(local, p, mp, a->node);
        kb_replica_assignment ra = {mp->leader,          mp->leader_epoch, mp->replicas.v,
                                    mp->replicas.n,      mp->isr.v,        mp->isr.n,
                                    mp->partition_epoch, a->on_isr,        a->on_isr_arg};
        ks_log *log = local->partitions[p].log;
        int64_t hw = log != NULL ? ks_log_high_watermark(log) : 0;
        if (hosted && kb_replica_assign(a->b, local, p, &ra) != KP_ERR_NONE)
            KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"cannot record a partition's replicas\" "
                   "topic=%s partition=%d", t->name, p);
        else if (hosted && log != NULL && ks_log_high_watermark(log) > hw)
            kb_partition_log_appended(a->b, local, p); /* a smaller ISR moved it: wake readers */
        kb_replica_fetch_follow(a->fetch, local, p, hosted ? mp->leader : -1, mp->leader_epoch);
        move_coordinator(a, t, p, hosted && mp->leader == a->node);
    }
}

static void on_created(void *arg, kp_err err)
{
    (void)arg;
    if (err != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"cannot make the partition directories of a "
               "cluster topic\" error=%s", kp_err_name(err));
}

static void create_local(kb_cluster_act *a, const kb_mi_topic *t)
{
    kb_topics *ts = a->b->topics;
    kp_str name = kp_str_from(t->name);
    if (kb_topics_busy(ts, name) != NULL)
        return; /* being created or deleted here: the next change retries */
    kb_topic *other = kb_topics_find(ts, name);
    if (other != NULL) {
        char ours[23], theirs[23];
        id_text(&other->id, ours);
        id_text(&t->id, theirs);
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"a local topic has the name of a cluster topic "
               "with another id; left alone\" topic=%s local_id=%s cluster_id=%s", t->name, ours,
               theirs);
        return;
    }
    kb_topic_config *configs = configs_of(t);
    kb_msgbuf msg = {{0}};
    kb_topic *lt = NULL;
    kp_err e = configs == NULL ? KP_ERR__NOMEM
                               : kb_topics_begin_create_id(ts, name, &t->id, t->n_parts, configs,
                                                           (size_t)t->configs.n, &lt, &msg);
    free(configs);
    if (e != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"cannot create a cluster topic here\" topic=%s "
               "error=%s detail=\"%s\"", t->name, kp_err_name(e), msg.text);
        return;
    }
    sync_partitions(a, lt, t);
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"creating a cluster topic's replicas\" topic=%s "
           "partitions=%d", t->name, t->n_parts);
    (void)kb_partition_dirs_create(a->b, lt, on_created, NULL);
}

static void reconcile(kb_cluster_act *a, const kb_mi_topic *t)
{
    kb_topic *local = kb_topics_find_id(a->b->topics, &t->id);
    if (local != NULL) {
        sync_partitions(a, local, t);
        return;
    }
    if (hosts_any(t, a->node))
        create_local(a, t);
}

static void on_timer(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_cluster_act *a = arg;
    if (a->all_dirty) {
        for (int i = 0; i < a->img->topics.n; i++)
            reconcile(a, a->img->topics.v[i]);
    } else {
        for (int i = 0; i < a->ndirty; i++) {
            const kb_mi_topic *t = kb_meta_image_topic_by_id(a->img, a->dirty[i]);
            if (t != NULL)
                reconcile(a, t);
        }
    }
    a->ndirty = 0;
    a->all_dirty = false;
}

static void mark_dirty(kb_cluster_act *a, const kb_mi_topic *t)
{
    if (a->ndirty > 0 && memcmp(a->dirty[a->ndirty - 1].b, t->id.b, sizeof(t->id.b)) == 0)
        return;
    if (a->ndirty < MAX_DIRTY)
        a->dirty[a->ndirty++] = t->id;
    else
        a->all_dirty = true;
    if (!kb_timer_armed(&a->timer))
        (void)kb_timer_arm(a->b->loop, &a->timer, 0);
}

static void remove_local(kb_cluster_act *a, const kb_mi_topic *t)
{
    kb_replica_fetch_forget_topic(a->fetch, &t->id);
    kb_topic *local = kb_topics_find_id(a->b->topics, &t->id);
    if (local == NULL)
        return;
    kb_msgbuf msg = {{0}};
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"deleting a cluster topic's replicas\" topic=%s",
           local->name);
    if (kb_topics_begin_delete(a->b->topics, local, &msg) != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"cannot delete a cluster topic here\" topic=%s "
               "detail=\"%s\"", local->name, msg.text);
        return;
    }
    kb_partition_log_drop_topic(a->b, local);
    (void)kb_partition_dirs_delete(a->b, local, NULL, NULL);
}

static void configs_changed(kb_cluster_act *a, const kb_mi_topic *t)
{
    kb_topic *local = kb_topics_find_id(a->b->topics, &t->id);
    kb_topic_config *configs = local != NULL ? configs_of(t) : NULL;
    if (configs == NULL)
        return;
    kb_msgbuf msg = {{0}};
    if (kb_topics_set_configs(a->b->topics, local, configs, (size_t)t->configs.n, &msg) ==
        KP_ERR_NONE)
        kb_partition_log_config_changed(a->b, local);
    else
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"cannot apply a cluster topic's configs\" "
               "topic=%s detail=\"%s\"", local->name, msg.text);
    free(configs);
}

static void on_change(void *arg, kb_mi_event_kind kind, const kb_mi_topic *t, int32_t p)
{
    kb_cluster_act *a = arg;
    (void)p;
    switch (kind) {
    case KB_MI_PARTITION: mark_dirty(a, t); break;
    case KB_MI_TOPIC_REMOVED: remove_local(a, t); break;
    default: configs_changed(a, t); break;
    }
}

kb_cluster_act *kb_cluster_act_new(kb_broker *b, kb_meta_image *img, int32_t node_id)
{
    kb_cluster_act *a = calloc(1, sizeof(*a));
    if (a == NULL)
        return NULL;
    a->b = b;
    a->img = img;
    a->node = node_id;
    if ((a->fetch = kb_replica_fetch_new(b, img)) == NULL) {
        free(a);
        return NULL;
    }
    kb_timer_init(&a->timer, on_timer, a);
    kb_meta_image_set_listener(img, on_change, a);
    return a;
}

void kb_cluster_act_set_isr(kb_cluster_act *a, kb_replica_isr_fn *fn, void *arg)
{
    a->on_isr = fn;
    a->on_isr_arg = arg;
}

void kb_cluster_act_free(kb_cluster_act *a)
{
    if (a == NULL)
        return;
    kb_timer_disarm(a->b->loop, &a->timer);
    kb_meta_image_set_listener(a->img, NULL, NULL);
    kb_replica_fetch_free(a->fetch);
    free(a);
}
