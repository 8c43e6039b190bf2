#include "kb_partition_log.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kb_log.h"
#include "kb_producer_snapshot.h"
#include "kb_replica.h"
#include "kb_producer_state.h"
#include "kb_retention_guard.h"
#include "kb_partition_txn.h"
#include "kb_partition_load.h"
#include "kb_topic_settings.h"
#include "kb_work.h"
#include "kp_records.h"
#include "ks_checkpoint.h"
#include "ks_compact.h"
#include "ks_flush.h"
#include "ks_retention.h"

#define KB_PARTITION_LOG_TICK_MS 100
#define KB_RETENTION_STEP_SEGMENTS 16
#define KB_FLUSH_DRAIN_BATCH 64
#define KB_CLEANER_RETRY_MS 300000 /* a log whose cleaning failed rests this long */
#define KB_CLEANER_MAP_SLOT 32     /* offset map bytes per key (ks_offmap.h) */
#define KB_LOAD_MAX_THREADS 64     /* num.recovery.threads.per.data.dir is capped here */
#define KB_LOAD_NICE 10            /* the loader threads' nice value (Linux: per thread) */

/* The one cleaning in progress: its job works on a helper thread and the
 * loop commits it once done is set (polled on the tick). */
typedef struct clean_task {
    pthread_t thread;
    ks_compact_job *job;
    ks_log *log;      /* stays open: drop and stop abort the task first */
    char *topic;      /* copy, for the log line */
    int32_t partition;
    int64_t started_ms;
    atomic_bool done;
    kp_err err;       /* the work's result, read after the join */
    kp_errctx ctx;
} clean_task;

/* A log whose last cleaning failed, skipped until until_ms. */
typedef struct clean_skip {
    struct clean_skip *next;
    const ks_log *log;
    int64_t until_ms;
} clean_skip;

/* The dirtiest compacted log found by a pass over the open logs. */
typedef struct clean_pick {
    kb_topic *t;
    int32_t partition;
    ks_log *log;
    double score;
} clean_pick;

/* A retention job whose files a helper thread is unlinking. */
typedef struct retention_task {
    struct retention_task *next;
    pthread_t thread;
    ks_retention_job job;
} retention_task;

typedef struct durable_waiter {
    struct durable_waiter *next;
    uint64_t cookie;
    kb_durable_cb *cb;
    void *arg;
} durable_waiter;

struct kb_partition_log {
    kb_broker *broker;
    ks_io io;
    ks_flush *flush;
    ks_ckpt_entry *recovery;
    size_t nrecovery;
    ks_ckpt_entry *starts;
    size_t nstarts;
    ks_ckpt_entry *hws;       /* replication-offset-checkpoint as read at start */
    size_t nhws;
    bool was_clean;
    durable_waiter *waiters;
    uint64_t next_cookie;
    kb_timer tick;
    int64_t last_retention_ms;
    int64_t last_checkpoint_ms;
    kb_append_hook *hook;
    void *hook_arg;
    retention_task *unlinking;
    ks_ckpt_entry *cleaned;   /* cleaner-offset-checkpoint as read at start */
    size_t ncleaned;
    clean_task *cleaning;
    clean_skip *clean_skips;
    clean_pick pick;
    int64_t last_clean_ms;
    kb_work *loader;          /* opens the logs at start-up; freed once all are online */
    int32_t nloading;         /* load jobs whose done has not run */
    int32_t nloaded;          /* went online from a load job */
    int32_t nload_failed;     /* load job failed (opened on use instead) */
    int32_t nunrecovered;     /* never opened this run: the stop came first */
    int64_t load_started_ms;
    bool stopping;
    kb_loaded_hook *loaded_hook;
    void *loaded_arg;
    kb_retention_guard *guard; /* runnel.retention.guard (kb_retention_guard.h) */
};

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static const char *log_dir(const kb_broker *b)
{
    return b->cfg->log_dirs.v[0];
}

/* ---- opening a partition (its life cycle: loading, then online) ------- */

/* What opening (t, partition) needs, for kb_partition_load_run on any thread. */
static void load_prepare(kb_partition_log *pl, kb_topic *t, int32_t partition, kb_partition_load *ld)
{
    memset(ld, 0, sizeof(*ld));
    ld->io = &pl->io;
    ld->dir = log_dir(pl->broker);
    ld->topic = t->name;
    ld->partition = partition;
    ld->lc = kb_topic_settings_of(pl->broker->cfg, t)->log;
    ld->args = (ks_log_open_args){
        .recovery_point = ks_checkpoint_find(pl->recovery, pl->nrecovery, t->name, partition),
        .log_start_offset = ks_checkpoint_find(pl->starts, pl->nstarts, t->name, partition),
        .clean_shutdown = pl->was_clean,
        .now_ms = wall_ms(),
    };
    ld->cleaner_offset = ks_checkpoint_find(pl->cleaned, pl->ncleaned, t->name, partition);
}

/* Logs what opening the log found; on success the partition takes the log
 * and its producer state and is online. */
static kp_err load_adopt(kb_partition_log *pl, kb_topic *t, int32_t partition, kb_partition_load *ld)
{
    if (ld->err != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"cannot %s\" topic=%s partition=%d "
               "error=%s detail=\"%s\"", ld->failed, t->name, partition, kp_err_name(ld->err),
               ld->ctx.msg);
        return ld->err;
    }
    const ks_recover_report *rep = &ld->rep;
    if (rep->truncated_bytes > 0)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE,
               "msg=\"recovery truncated a torn or corrupt tail\" topic=%s partition=%d "
               "file=%s/%s-%d/%020lld.log position=%lld bytes=%lld reason=\"%s\"",
               t->name, partition, log_dir(pl->broker), t->name, partition,
               (long long)rep->truncated_base, (long long)rep->truncated_pos,
               (long long)rep->truncated_bytes, rep->reason);
    kb_partition *p = &t->partitions[partition];
    p->log = ld->log;
    p->pids = ld->pids;
    if (kb_config_cluster_mode(pl->broker->cfg)) { /* replication moves the HW */
        ks_log_set_replicated(p->log, true);
        ks_log_set_high_watermark(p->log, ks_checkpoint_find(pl->hws, pl->nhws, t->name,
                                                             partition));
        (void)kb_replica_advance_hw(pl->broker, t, partition); /* a sole replica's is its end */
        kb_replica_leader_epoch_start(t, partition);
    } else if (ks_log_latest_epoch(p->log) < p->leader_epoch) { /* the sole replica leads */
        kp_errctx ctx = {{0}, NULL, 0, 0};
        if (ks_log_assign_epoch(p->log, p->leader_epoch, ks_log_end_offset(p->log), &ctx) !=
            KP_ERR_NONE)
            KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"cannot record the leader epoch\" "
                   "topic=%s partition=%d detail=\"%s\"", t->name, partition, ctx.msg);
    }
    ld->log = NULL;
    ld->pids = NULL;
    return KP_ERR_NONE;
}

kp_err kb_partition_log_get(kb_broker *b, kb_topic *t, int32_t partition, ks_log **out)
{
    /* A topic whose directories are being made or removed (kb_partition_dirs.h), met
     * through a pointer taken before, e.g. by a produce on a helper thread. */
    if (t->state != KB_TOPIC_READY || partition < 0 || partition >= t->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    kb_partition *p = &t->partitions[partition];
    if (p->log != NULL) {
        *out = p->log;
        return KP_ERR_NONE;
    }
    if (p->load != NULL)
        return KP_ERR_NOT_LEADER_OR_FOLLOWER; /* Kafka's answer for a partition not yet online */
    /* Not loaded at start-up: created since (an empty log, opened at once),
     * internal (its coordinator opens it before the broker serves), or its
     * load failed (tried again here). */
    kb_partition_log *pl = b->partition_logs;
    kb_partition_load ld;
    load_prepare(pl, t, partition, &ld);
    kb_partition_load_run(&ld);
    kp_err e = load_adopt(pl, t, partition, &ld);
    if (e == KP_ERR_NONE)
        *out = p->log;
    return e;
}

bool kb_partition_log_loading(const kb_topic *t, int32_t partition)
{
    return partition >= 0 && partition < t->npartitions && t->partitions[partition].load != NULL;
}

int16_t kb_partition_log_lookup(kb_broker *b, kp_str topic, int32_t partition, kb_topic **t,
                       ks_log **log)
{
    *t = kb_topics_find(b->topics, topic);
    if (*t == NULL || partition < 0 || partition >= (*t)->npartitions)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    return kp_err_to_wire(kb_partition_log_get(b, *t, partition, log));
}

int16_t kb_partition_log_check_epoch(int32_t client_epoch, int32_t ours)
{
    if (client_epoch < 0 || client_epoch == ours)
        return KP_ERR_NONE;
    return client_epoch > ours ? KP_ERR_UNKNOWN_LEADER_EPOCH : KP_ERR_FENCED_LEADER_EPOCH;
}

const ks_io *kb_partition_log_io(const kb_broker *b)
{
    return &b->partition_logs->io;
}

kp_err kb_partition_log_append(kb_broker *b, kb_topic *t, int32_t partition, uint8_t *batches, size_t len,
                      ks_append_result *res)
{
    ks_log *log;
    kp_err e = kb_partition_log_get(b, t, partition, &log);
    if (e != KP_ERR_NONE)
        return e;
    kb_partition_log *pl = b->partition_logs;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    int32_t segments = ks_log_segment_count(log);
    e = ks_log_append(log, batches, len, t->partitions[partition].leader_epoch, wall_ms(), res,
                      &ctx);
    /* A roll happens before the batches: the state is that of the offsets
     * below the new segment, whose base is the first appended offset. */
    if (e == KP_ERR_NONE && ks_log_segment_count(log) > segments)
        kb_producer_snapshot_save_at_roll(&pl->io, pl->flush, log, t->partitions[partition].pids,
                                          res->base_offset);
    if (e != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"append failed\" topic=%s partition=%d "
               "error=%s detail=\"%s\"", t->name, partition, kp_err_name(e), ctx.msg);
        return e;
    }
    if (ks_flush_policy_due(log, kb_loop_now_ms(b->loop)))
        (void)ks_flush_submit(pl->flush, log, 0, NULL);
    return KP_ERR_NONE;
}

kp_err kb_partition_log_append_replica(kb_broker *b, kb_topic *t, int32_t partition,
                                      const uint8_t *batches, size_t len, ks_append_result *res)
{
    ks_log *log;
    kp_err e = kb_partition_log_get(b, t, partition, &log);
    if (e != KP_ERR_NONE)
        return e;
    kb_partition_log *pl = b->partition_logs;
    kb_partition *p = &t->partitions[partition];
    kp_errctx ctx = {{0}, NULL, 0, 0};
    int32_t segments = ks_log_segment_count(log);
    int64_t from = ks_log_end_offset(log);
    if ((e = ks_log_append_replica(log, batches, len, wall_ms(), res, &ctx)) != KP_ERR_NONE) {
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"replica append refused\" topic=%s "
               "partition=%d error=%s detail=\"%s\"", t->name, partition, kp_err_name(e),
               ctx.msg);
        return e;
    }
    if (ks_log_segment_count(log) > segments)
        kb_producer_snapshot_save_at_roll(&pl->io, pl->flush, log, p->pids, res->base_offset);
    /* the producers' state follows the leader's, for a failover */
    if (p->pids != NULL &&
        (e = kb_producer_state_rebuild_from(p->pids, &pl->io, log, from, NULL)) != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"replica producer state not rebuilt\" "
               "topic=%s partition=%d error=%s", t->name, partition, kp_err_name(e));
    if (ks_flush_policy_due(log, kb_loop_now_ms(b->loop)))
        (void)ks_flush_submit(pl->flush, log, 0, NULL);
    return KP_ERR_NONE;
}

kp_err kb_partition_log_truncate(kb_broker *b, kb_topic *t, int32_t partition, int64_t offset)
{
    ks_log *log;
    kp_err e = kb_partition_log_get(b, t, partition, &log);
    if (e != KP_ERR_NONE || offset >= ks_log_end_offset(log))
        return e;
    kb_partition_log *pl = b->partition_logs;
    kb_partition *p = &t->partitions[partition];
    kp_errctx ctx = {{0}, NULL, 0, 0};
    int64_t leo = ks_log_end_offset(log);
    if ((e = ks_log_truncate_to(log, offset, wall_ms(), &ctx)) != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"truncation failed\" topic=%s partition=%d "
               "offset=%lld error=%s detail=\"%s\"", t->name, partition, (long long)offset,
               kp_err_name(e), ctx.msg);
        return e;
    }
    /* the producers' state is that of the log left: snapshots past its end
     * go, the newest one left and the batches after it make it again */
    kb_producer_state *pids = kb_producer_state_new();
    if (pids != NULL && (e = kb_producer_snapshot_restore(&pl->io, log, pids, NULL)) == KP_ERR_NONE) {
        kb_producer_state_free(p->pids);
        p->pids = pids;
    } else {
        kb_producer_state_free(pids);
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"producer state not rebuilt after truncation\" "
               "topic=%s partition=%d error=%s", t->name, partition, kp_err_name(e));
    }
    KB_LOG(KB_LL_INFO, KB_SUB_STORAGE, "msg=\"truncated a diverged log\" topic=%s partition=%d "
           "from=%lld to=%lld high_watermark=%lld latest_epoch=%d", t->name, partition,
           (long long)leo, (long long)ks_log_end_offset(log),
           (long long)ks_log_high_watermark(log), ks_log_latest_epoch(log));
    return KP_ERR_NONE;
}

void kb_partition_log_appended(kb_broker *b, kb_topic *t, int32_t partition)
{
    kb_partition_log *pl = b->partition_logs;
    (void)kb_replica_advance_hw(b, t, partition);
    if (pl->hook != NULL)
        pl->hook(pl->hook_arg, t, partition);
}

kb_retention_guard *kb_partition_log_guard(kb_broker *b)
{
    return b->partition_logs != NULL ? b->partition_logs->guard : NULL;
}

void kb_partition_log_set_append_hook(kb_broker *b, kb_append_hook *hook, void *arg)
{
    b->partition_logs->hook = hook;
    b->partition_logs->hook_arg = arg;
}

kp_err kb_partition_log_when_durable(kb_broker *b, ks_log *log, int64_t offset, kb_durable_cb *cb,
                            void *arg)
{
    kb_partition_log *pl = b->partition_logs;
    if (b->cfg->flush_acks_all == KB_FLUSH_PAGE_CACHE || ks_log_recovery_point(log) >= offset) {
        cb(arg, KP_ERR_NONE);
        return KP_ERR_NONE;
    }
    durable_waiter *w = calloc(1, sizeof(*w));
    if (w == NULL)
        return KP_ERR__NOMEM;
    w->cookie = ++pl->next_cookie;
    w->cb = cb;
    w->arg = arg;
    kp_err e = ks_flush_submit(pl->flush, log, w->cookie, NULL);
    if (e != KP_ERR_NONE) {
        free(w);
        return e;
    }
    w->next = pl->waiters;
    pl->waiters = w;
    return KP_ERR_NONE;
}

static durable_waiter *take_waiter(kb_partition_log *pl, uint64_t cookie)
{
    for (durable_waiter **pp = &pl->waiters; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->cookie == cookie) {
            durable_waiter *w = *pp;
            *pp = w->next;
            return w;
        }
    }
    return NULL;
}

static void drain_flushes(kb_partition_log *pl)
{
    ks_flush_done done[KB_FLUSH_DRAIN_BATCH];
    size_t n;
    while ((n = ks_flush_drain(pl->flush, wall_ms(), done, KB_FLUSH_DRAIN_BATCH)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (done[i].err != KP_ERR_NONE)
                KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"flush failed\" topic=%s partition=%d "
                       "error=%s detail=\"%s\"", ks_log_topic(done[i].log),
                       ks_log_partition(done[i].log), kp_err_name(done[i].err),
                       done[i].errctx.msg);
            durable_waiter *w = done[i].cookie ? take_waiter(pl, done[i].cookie) : NULL;
            if (w != NULL) {
                w->cb(w->arg, done[i].err);
                free(w);
            }
        }
    }
}

static void on_flush_event(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)loop;
    (void)events;
    uint64_t v;
    if (read(fd, &v, sizeof(v)) < 0) {
        /* EAGAIN: nothing new; completions are drained below regardless */
    }
    drain_flushes(arg);
}

/* Waits (bounded by the flush thread's progress) until no flush is in flight for log. */
static void wait_idle(kb_partition_log *pl, ks_log *log)
{
    for (int i = 0; i < 10000 && ks_log_flush_pending(log) > 0; i++) {
        struct pollfd pfd = {ks_flush_eventfd(pl->flush), POLLIN, 0};
        (void)poll(&pfd, 1, 10);
        drain_flushes(pl);
    }
}

/* ---- periodic work ------------------------------------------------------ */

typedef void log_visit_fn(kb_partition_log *pl, kb_topic *t, int32_t partition, ks_log *log);

static void for_each_open_log(kb_partition_log *pl, log_visit_fn *fn)
{
    kb_topics *ts = pl->broker->topics;
    for (size_t i = 0; i < kb_topics_count(ts); i++) {
        kb_topic *t = kb_topics_at(ts, i);
        for (int32_t p = 0; p < t->npartitions; p++)
            if (t->partitions[p].log != NULL)
                fn(pl, t, p, t->partitions[p].log);
    }
}

static void flush_if_due(kb_partition_log *pl, kb_topic *t, int32_t partition, ks_log *log)
{
    (void)t;
    (void)partition;
    if (ks_log_flush_pending(log) == 0 && ks_flush_policy_due(log, wall_ms()))
        (void)ks_flush_submit(pl->flush, log, 0, NULL);
}

static void *retention_unlink_main(void *arg)
{
    retention_task *task = arg;
    (void)ks_retention_finish(&task->job, NULL);
    return NULL;
}

/* Joins the unlink threads that are done (all of them when wait is set). */
static void retention_reap(kb_partition_log *pl, bool wait)
{
    retention_task **pp = &pl->unlinking;
    while (*pp != NULL) {
        retention_task *task = *pp;
        int rc = wait ? pthread_join(task->thread, NULL) : pthread_tryjoin_np(task->thread, NULL);
        if (rc == 0) {
            *pp = task->next;
            free(task);
        } else {
            pp = &task->next;
        }
    }
}

/* Unlinks detached segments' files on a helper thread (on the loop when no
 * thread can be had), so a large delete never stalls the loop. */
static void unlink_later(kb_partition_log *pl, ks_retention_job *job)
{
    retention_task *task = job->n > 0 ? calloc(1, sizeof(*task)) : NULL;
    if (task != NULL)
        task->job = *job;
    if (task == NULL || pthread_create(&task->thread, NULL, retention_unlink_main, task) != 0) {
        (void)ks_retention_finish(job, NULL);
        free(task);
        return;
    }
    memset(job, 0, sizeof(*job));
    task->next = pl->unlinking;
    pl->unlinking = task;
}

/* Detaches old segments on the loop (cheap), then unlink_later. */
static void retention_step(kb_partition_log *pl, kb_topic *t, int32_t partition, ks_log *log)
{
    ks_retention_job job;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    int64_t now = wall_ms();
    int32_t max = kb_retention_guard_limit(pl->guard, log, now, KB_RETENTION_STEP_SEGMENTS);
    job.segs = NULL;
    if (max == 0 || ks_retention_plan(log, now, max, &job, &ctx) != KP_ERR_NONE ||
        job.n == 0) {
        free(job.segs);
        return;
    }
    KB_LOG(KB_LL_INFO, KB_SUB_STORAGE,
           "msg=\"retention deleted segments\" topic=%s partition=%d segments=%d bytes=%lld "
           "log_start_offset=%lld", t->name, partition, job.n, (long long)job.bytes,
           (long long)ks_log_start_offset(log));
    unlink_later(pl, &job);
    kb_producer_snapshot_prune(&pl->io, log);
}

/* ---- log cleaner (compacted topics) -------------------------------------- */

/* The cleaner's settings for t: the topic's, with this broker's map size. */
static void topic_compact_config(const kb_config *cfg, kb_topic *t, ks_compact_config *cc)
{
    *cc = kb_topic_settings_of(cfg, t)->compact;
    cc->map_entries = cfg->log_cleaner_dedupe_buffer_size / KB_CLEANER_MAP_SLOT;
}

/* What the partition's transactions mean to its cleaner: the last stable
 * offset and, when aborted is not NULL, the aborted transactions below it
 * (in *aborted, which the caller frees; NULL when there are none). */
static kp_err partition_txns(const kb_topic *t, int32_t partition, ks_compact_txns *txns,
                             ks_compact_aborted **aborted)
{
    const kb_partition *part = &t->partitions[partition];
    kb_partition_txn *x = part->pids != NULL ? kb_producer_state_txns(part->pids) : NULL;
    int64_t hw = ks_log_high_watermark(part->log);
    *txns = (ks_compact_txns){x != NULL ? kb_partition_txn_lso(x, hw) : hw, NULL, 0};
    if (aborted != NULL)
        *aborted = NULL;
    int32_t max = x != NULL && aborted != NULL ? kb_partition_txn_aborted_count(x) : 0;
    if (max == 0)
        return KP_ERR_NONE;
    kb_aborted_txn *v = calloc((size_t)max, sizeof(*v));
    ks_compact_aborted *a = calloc((size_t)max, sizeof(*a));
    if (v == NULL || a == NULL) {
        free(v);
        free(a);
        return KP_ERR__NOMEM;
    }
    int32_t n = kb_partition_txn_aborted(x, ks_log_start_offset(part->log), txns->stable_offset, v, max);
    for (int32_t i = 0; i < n; i++)
        a[i] = (ks_compact_aborted){v[i].producer_id, v[i].first_offset, v[i].last_offset};
    free(v);
    *aborted = a;
    txns->aborted = a;
    txns->naborted = n;
    return KP_ERR_NONE;
}

static bool clean_skipped(kb_partition_log *pl, const ks_log *log, int64_t now)
{
    for (clean_skip **pp = &pl->clean_skips; *pp != NULL;) {
        clean_skip *s = *pp;
        if (s->until_ms <= now) {
            *pp = s->next;
            free(s);
        } else if (s->log == log) {
            return true;
        } else {
            pp = &s->next;
        }
    }
    return false;
}

/* Scores a compacted log for pl->pick: its dirty ratio, forced ones first. */
static void clean_consider(kb_partition_log *pl, kb_topic *t, int32_t partition, ks_log *log)
{
    const kb_config *cfg = pl->broker->cfg;
    if (!kb_topic_settings_of(cfg, t)->cleanup_compact || clean_skipped(pl, log, wall_ms()))
        return;
    ks_compact_config cc;
    ks_compact_stats st;
    ks_compact_txns txns;
    topic_compact_config(cfg, t, &cc);
    (void)partition_txns(t, partition, &txns, NULL);
    if (ks_compact_measure(log, &cc, &txns, wall_ms(), &st, NULL) != KP_ERR_NONE || !st.cleanable)
        return;
    double score = st.ratio + (st.forced ? 1.0 : 0.0);
    if (pl->pick.log == NULL || score > pl->pick.score)
        pl->pick = (clean_pick){t, partition, log, score};
}

static void *clean_main(void *arg)
{
    clean_task *task = arg;
    task->err = ks_compact_work(task->job, &task->ctx);
    atomic_store(&task->done, true);
    return NULL;
}

static void clean_task_free(clean_task *task)
{
    ks_compact_job_free(task->job);
    free(task->topic);
    free(task);
}

/* Plans a cleaning of the dirtiest compacted log and starts its work. */
static void clean_start(kb_partition_log *pl)
{
    memset(&pl->pick, 0, sizeof(pl->pick));
    for_each_open_log(pl, clean_consider);
    clean_pick pick = pl->pick;
    if (pick.log == NULL)
        return;
    ks_compact_config cc;
    ks_compact_txns txns;
    ks_compact_aborted *aborted = NULL;
    topic_compact_config(pl->broker->cfg, pick.t, &cc);
    clean_task *task = calloc(1, sizeof(*task));
    kp_errctx ctx = {{0}, NULL, 0, 0};
    kp_err e = task != NULL ? partition_txns(pick.t, pick.partition, &txns, &aborted)
                            : KP_ERR__NOMEM;
    if (e == KP_ERR_NONE)
        e = ks_compact_plan(pick.log, &cc, &txns, wall_ms(), &task->job, &ctx);
    free(aborted);
    if (e == KP_ERR_NONE && task->job != NULL) {
        task->log = pick.log;
        task->topic = strdup(pick.t->name);
        task->partition = pick.partition;
        task->started_ms = kb_loop_now_ms(pl->broker->loop);
        atomic_init(&task->done, false);
        if (task->topic != NULL && pthread_create(&task->thread, NULL, clean_main, task) == 0) {
            pl->cleaning = task;
            return;
        }
        e = KP_ERR__NOMEM;
    }
    if (e != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"cannot start log cleaning\" topic=%s "
               "partition=%d error=%s detail=\"%s\"", pick.t->name, pick.partition,
               kp_err_name(e), ctx.msg);
    if (task != NULL)
        clean_task_free(task);
}

static void clean_report(kb_partition_log *pl, const clean_task *task, kp_err e,
                         const ks_compact_result *res, const kp_errctx *ctx)
{
    int64_t ms = kb_loop_now_ms(pl->broker->loop) - task->started_ms;
    if (e == KP_ERR_NONE) {
        KB_LOG(KB_LL_INFO, KB_SUB_STORAGE,
               "msg=\"log cleaned\" topic=%s partition=%d segments=%d bytes_before=%lld "
               "bytes_after=%lld records_removed=%lld tombstones_removed=%lld "
               "aborted_removed=%lld dirty_from=%lld cleaned_to=%lld groups_discarded=%d ms=%lld",
               task->topic, task->partition, res->segments_before, (long long)res->bytes_before,
               (long long)res->bytes_after, (long long)res->records_removed,
               (long long)res->tombstones_removed, (long long)res->aborted_removed,
               (long long)res->first_dirty, (long long)res->end_offset, res->groups_discarded,
               (long long)ms);
        return;
    }
    KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"log cleaning failed\" topic=%s partition=%d "
           "error=%s detail=\"%s\" retry_in_ms=%d", task->topic, task->partition,
           kp_err_name(e), ctx->msg, KB_CLEANER_RETRY_MS);
    clean_skip *s = calloc(1, sizeof(*s));
    if (s != NULL) {
        *s = (clean_skip){pl->clean_skips, task->log, wall_ms() + KB_CLEANER_RETRY_MS};
        pl->clean_skips = s;
    }
}

/* Joins a finished cleaning (or, with abort, cancels and joins it) and
 * commits it on the loop; an aborted one commits nothing. */
static void clean_finish(kb_partition_log *pl, bool abort)
{
    clean_task *task = pl->cleaning;
    if (task == NULL || (!abort && !atomic_load(&task->done)))
        return;
    if (abort)
        ks_compact_cancel(task->job);
    (void)pthread_join(task->thread, NULL);
    pl->cleaning = NULL;
    if (!abort) {
        ks_compact_result res;
        kp_errctx ctx = task->ctx;
        kp_err e = task->err == KP_ERR_NONE ? ks_compact_commit(task->log, task->job, &res, &ctx)
                                            : task->err;
        if (task->err != KP_ERR_NONE)
            memset(&res, 0, sizeof(res));
        clean_report(pl, task, e, &res, &ctx);
        unlink_later(pl, &res.garbage);
        free(res.garbage.segs);
    }
    clean_task_free(task);
}

/* Aborts the cleaning when it works on log (before the log goes away). */
static void clean_abort_for(kb_partition_log *pl, const ks_log *log)
{
    if (pl->cleaning != NULL && pl->cleaning->log == log)
        clean_finish(pl, true);
}

/* Collects (topic, partition, offset) entries of every open log. */
typedef int64_t ckpt_value_fn(const ks_log *log);

typedef struct ckpt_acc {
    ks_ckpt_entry *v;
    size_t n;
    ckpt_value_fn *value; /* an entry per log whose value is >= 0 */
} ckpt_acc;

static void ckpt_collect(kb_topics *ts, ckpt_acc *acc)
{
    size_t cap = 0;
    for (size_t i = 0; i < kb_topics_count(ts); i++)
        cap += (size_t)kb_topics_at(ts, i)->npartitions;
    acc->v = calloc(cap + 1, sizeof(*acc->v));
    acc->n = 0;
    if (acc->v == NULL)
        return;
    for (size_t i = 0; i < kb_topics_count(ts); i++) {
        kb_topic *t = kb_topics_at(ts, i);
        for (int32_t p = 0; p < t->npartitions; p++) {
            ks_log *log = t->partitions[p].log;
            if (log == NULL)
                continue;
            int64_t off = acc->value(log);
            if (off >= 0)
                acc->v[acc->n++] = (ks_ckpt_entry){t->name, p, off};
        }
    }
}

/* Merges the checkpoint entries of logs never opened this run, so a
 * restart that touched few partitions keeps what the others had. */
static void ckpt_write(kb_partition_log *pl, const char *name, ckpt_value_fn *value,
                       const ks_ckpt_entry *old, size_t nold)
{
    ckpt_acc acc = {NULL, 0, value};
    ckpt_collect(pl->broker->topics, &acc);
    if (acc.v == NULL)
        return;
    ks_ckpt_entry *all = calloc(acc.n + nold + 1, sizeof(*all));
    if (all != NULL) {
        size_t n = acc.n;
        memcpy(all, acc.v, acc.n * sizeof(*all));
        for (size_t i = 0; i < nold; i++) {
            kb_topic *t = kb_topics_find(pl->broker->topics, kp_str_from(old[i].topic));
            if (t != NULL && old[i].partition < t->npartitions &&
                t->partitions[old[i].partition].log == NULL)
                all[n++] = old[i];
        }
        kp_errctx ctx = {{0}, NULL, 0, 0};
        if (ks_checkpoint_write(&pl->io, log_dir(pl->broker), name, all, n, &ctx) != KP_ERR_NONE)
            KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"cannot write checkpoint\" file=%s "
                   "detail=\"%s\"", name, ctx.msg);
        free(all);
    }
    free(acc.v);
}

static void ckpt_write_all(kb_partition_log *pl)
{
    ckpt_write(pl, KS_CKPT_RECOVERY_POINT, ks_log_recovery_point, pl->recovery, pl->nrecovery);
    ckpt_write(pl, KS_CKPT_LOG_START, ks_log_start_offset, pl->starts, pl->nstarts);
    ckpt_write(pl, KS_CKPT_CLEANER, ks_log_cleaner_offset, pl->cleaned, pl->ncleaned);
    if (kb_config_cluster_mode(pl->broker->cfg))
        ckpt_write(pl, KS_CKPT_REPLICATION, ks_log_high_watermark, pl->hws, pl->nhws);
}

static void on_tick(kb_loop *loop, void *arg)
{
    kb_partition_log *pl = arg;
    const kb_config *cfg = pl->broker->cfg;
    int64_t now = kb_loop_now_ms(loop);
    if (pl->loader != NULL && pl->nloading == 0) {
        kb_work_free(pl->loader, loop); /* every log is online */
        pl->loader = NULL;
    }
    for_each_open_log(pl, flush_if_due);
    if (now - pl->last_retention_ms >= cfg->log_retention_check_interval_ms) {
        pl->last_retention_ms = now;
        retention_reap(pl, false);
        for_each_open_log(pl, retention_step);
    }
    clean_finish(pl, false);
    if (cfg->log_cleaner_enable && pl->cleaning == NULL &&
        now - pl->last_clean_ms >= cfg->log_cleaner_backoff_ms) {
        pl->last_clean_ms = now;
        clean_start(pl);
    }
    if (now - pl->last_checkpoint_ms >= cfg->log_flush_offset_checkpoint_interval_ms) {
        pl->last_checkpoint_ms = now;
        ckpt_write_all(pl);
    }
    (void)kb_timer_arm(loop, &pl->tick, KB_PARTITION_LOG_TICK_MS);
}

/* ---- loading at start-up ------------------------------------------------ */

enum { LOAD_QUEUED, LOAD_RUNNING, LOAD_CANCELLED, LOAD_FINISHED };

/* One partition's log opening on a helper thread. The partition points at
 * it (kb_partition.load) until the loop takes the result; the done callback
 * always frees it. */
struct kb_partition_log_load {
    kb_partition_log *pl;
    kp_uuid topic_id;
    int32_t partition;
    char *topic;     /* ld.topic points here */
    atomic_int state;
    bool detached;   /* loop only: the partition no longer waits for it */
    kb_partition_load ld;
};

static void load_free(struct kb_partition_log_load *job)
{
    kb_partition_load_discard(&job->ld);
    free(job->topic);
    free(job);
}

/* Loading yields the CPU to serving: on a machine with few cores the
 * recovery scans would otherwise delay the event loop's answers. */
static void load_thread_yields(void)
{
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && nice_now < KB_LOAD_NICE)
        (void)setpriority(PRIO_PROCESS, tid, KB_LOAD_NICE);
}

/* Helper thread: opens the log, unless cancelled while queued. */
static void load_work(void *arg)
{
    struct kb_partition_log_load *job = arg;
    int expected = LOAD_QUEUED;
    if (!atomic_compare_exchange_strong(&job->state, &expected, LOAD_RUNNING))
        return;
    load_thread_yields();
    kb_partition_load_run(&job->ld);
    atomic_store(&job->state, LOAD_FINISHED);
}

static void load_report(kb_partition_log *pl)
{
    KB_LOG(KB_LL_INFO, KB_SUB_STORAGE, "msg=\"partitions loaded\" online=%d failed=%d ms=%lld",
           pl->nloaded, pl->nload_failed,
           (long long)(kb_loop_now_ms(pl->broker->loop) - pl->load_started_ms));
    if (pl->loaded_hook != NULL)
        pl->loaded_hook(pl->loaded_arg);
}

/* Loop: the partition goes online with the opened log (with the topic's
 * configuration as it is now), or, if its load failed, is opened on use. */
static void load_done(void *arg)
{
    struct kb_partition_log_load *job = arg;
    kb_partition_log *pl = job->pl;
    pl->nloading--;
    kb_topic *t = job->detached ? NULL : kb_topics_find_id(pl->broker->topics, &job->topic_id);
    if (t != NULL) {
        t->partitions[job->partition].load = NULL;
        if (atomic_load(&job->state) != LOAD_FINISHED) {
            pl->nunrecovered++; /* cancelled by the stop */
        } else if (pl->stopping) {
            /* opened but never served: closed below, unchanged */
        } else if (load_adopt(pl, t, job->partition, &job->ld) == KP_ERR_NONE) {
            ks_log_config lc = kb_topic_settings_of(pl->broker->cfg, t)->log;
            (void)ks_log_set_config(t->partitions[job->partition].log, &lc, NULL);
            pl->nloaded++;
        } else {
            pl->nload_failed++;
        }
    }
    load_free(job);
    if (pl->nloading == 0 && !pl->stopping)
        load_report(pl);
}

/* Cancels a queued load, or waits for a running one (one log's opening)
 * and hands its result to the partition, so the caller finds the
 * partition either unopened or open, never half-way. */
static void load_detach(kb_partition *p)
{
    struct kb_partition_log_load *job = p->load;
    int expected = LOAD_QUEUED;
    if (!atomic_compare_exchange_strong(&job->state, &expected, LOAD_CANCELLED)) {
        while (atomic_load(&job->state) != LOAD_FINISHED)
            (void)poll(NULL, 0, 1);
        p->log = job->ld.log;
        p->pids = job->ld.pids;
        job->ld.log = NULL;
        job->ld.pids = NULL;
    }
    job->detached = true;
    p->load = NULL;
}

static int32_t partitions_to_load(kb_topics *ts)
{
    int32_t n = 0;
    for (size_t i = 0; i < kb_topics_count(ts); i++) {
        const kb_topic *t = kb_topics_at(ts, i);
        n += t->internal ? 0 : t->npartitions;
    }
    return n;
}

static void load_submit(kb_partition_log *pl, kb_topic *t, int32_t partition)
{
    struct kb_partition_log_load *job = calloc(1, sizeof(*job));
    char *name = job != NULL ? strdup(t->name) : NULL;
    if (name == NULL) {
        free(job);
        return; /* opened on use instead */
    }
    *job = (struct kb_partition_log_load){.pl = pl, .topic_id = t->id, .partition = partition,
                                 .topic = name};
    atomic_init(&job->state, LOAD_QUEUED);
    load_prepare(pl, t, partition, &job->ld);
    job->ld.topic = job->topic;
    if (kb_work_post(pl->loader, load_work, load_done, job) != KP_ERR_NONE) {
        load_free(job);
        return;
    }
    t->partitions[partition].load = job;
    pl->nloading++;
}

/* Queues the opening of every partition log on the disk, but the internal
 * topics' (their coordinators read them before the broker serves), on
 * num.recovery.threads.per.data.dir helper threads. */
static void load_start(kb_partition_log *pl)
{
    kb_broker *b = pl->broker;
    int32_t n = partitions_to_load(b->topics);
    pl->load_started_ms = kb_loop_now_ms(b->loop);
    if (n == 0)
        return;
    int threads = b->cfg->num_recovery_threads;
    threads = threads < n ? threads : n;
    threads = threads < KB_LOAD_MAX_THREADS ? threads : KB_LOAD_MAX_THREADS;
    if (kb_work_new(b->loop, threads, &pl->loader) != KP_ERR_NONE) {
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"no helper threads to load the logs; each "
               "opens on first use\"");
        kb_work_free(pl->loader, b->loop);
        pl->loader = NULL;
        return;
    }
    kb_topics *ts = b->topics;
    for (size_t i = 0; i < kb_topics_count(ts); i++) {
        kb_topic *t = kb_topics_at(ts, i);
        for (int32_t p = 0; p < t->npartitions && !t->internal; p++)
            load_submit(pl, t, p);
    }
    KB_LOG(KB_LL_INFO, KB_SUB_STORAGE, "msg=\"loading partitions\" partitions=%d threads=%d",
           pl->nloading, threads);
}

/* At stop: queued loads are cancelled, running ones finish and are closed. */
static void load_stop(kb_partition_log *pl)
{
    if (pl->loader == NULL)
        return;
    pl->stopping = true;
    kb_topics *ts = pl->broker->topics;
    for (size_t i = 0; i < kb_topics_count(ts); i++) {
        kb_topic *t = kb_topics_at(ts, i);
        for (int32_t p = 0; p < t->npartitions; p++) {
            struct kb_partition_log_load *job = t->partitions[p].load;
            int expected = LOAD_QUEUED;
            if (job != NULL)
                (void)atomic_compare_exchange_strong(&job->state, &expected, LOAD_CANCELLED);
        }
    }
    kb_work_free(pl->loader, pl->broker->loop); /* runs every done */
    pl->loader = NULL;
}

void kb_partition_log_set_loaded_hook(kb_broker *b, kb_loaded_hook *hook, void *arg)
{
    b->partition_logs->loaded_hook = hook;
    b->partition_logs->loaded_arg = arg;
}

/* ---- topic changes ------------------------------------------------------ */

void kb_partition_log_drop_topic(kb_broker *b, kb_topic *t)
{
    for (int32_t p = 0; p < t->npartitions; p++) {
        if (t->partitions[p].load != NULL)
            load_detach(&t->partitions[p]);
        ks_log *log = t->partitions[p].log;
        if (log == NULL)
            continue;
        wait_idle(b->partition_logs, log);
        clean_abort_for(b->partition_logs, log);
        kp_errctx ctx = {{0}, NULL, 0, 0};
        /* The directory still holds the registry's partition.metadata, which
         * kb_topics_delete removes with it: a non-empty rmdir is expected. */
        if (ks_log_delete(log, &ctx) != KP_ERR_NONE && ctx.sys_errno != ENOTEMPTY)
            KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"deleting log failed\" topic=%s "
                   "partition=%d detail=\"%s\"", t->name, p, ctx.msg);
        t->partitions[p].log = NULL;
        kb_producer_state_free(t->partitions[p].pids);
        t->partitions[p].pids = NULL;
    }
}

void kb_partition_log_config_changed(kb_broker *b, kb_topic *t)
{
    kb_topic_settings_invalidate(t);
    ks_log_config lc = kb_topic_settings_of(b->cfg, t)->log;
    for (int32_t p = 0; p < t->npartitions; p++) {
        kp_errctx ctx = {{0}, NULL, 0, 0};
        if (t->partitions[p].log != NULL &&
            ks_log_set_config(t->partitions[p].log, &lc, &ctx) != KP_ERR_NONE)
            KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"config not applied\" topic=%s "
                   "partition=%d detail=\"%s\"", t->name, p, ctx.msg);
    }
}

/* ---- start and stop ----------------------------------------------------- */

kp_err kb_partition_log_start(kb_broker *b, char *err, size_t errlen)
{
    kb_partition_log *pl = calloc(1, sizeof(*pl));
    if (pl == NULL)
        return KP_ERR__NOMEM;
    b->partition_logs = pl;
    pl->broker = b;
    pl->io = ks_io_posix();
    if ((pl->guard = kb_retention_guard_new(b->cfg)) == NULL)
        return KP_ERR__NOMEM;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    const char *dir = log_dir(b);
    if (ks_clean_shutdown_take(&pl->io, dir, &pl->was_clean, &ctx) != KP_ERR_NONE)
        pl->was_clean = false;
    if (ks_checkpoint_read(&pl->io, dir, KS_CKPT_RECOVERY_POINT, &pl->recovery, &pl->nrecovery,
                           &ctx) != KP_ERR_NONE) {
        pl->recovery = NULL;
        pl->nrecovery = 0;
    }
    if (ks_checkpoint_read(&pl->io, dir, KS_CKPT_LOG_START, &pl->starts, &pl->nstarts, &ctx) !=
        KP_ERR_NONE) {
        pl->starts = NULL;
        pl->nstarts = 0;
    }
    if (ks_checkpoint_read(&pl->io, dir, KS_CKPT_REPLICATION, &pl->hws, &pl->nhws, &ctx) !=
        KP_ERR_NONE) {
        pl->hws = NULL;
        pl->nhws = 0;
    }
    if (ks_checkpoint_read(&pl->io, dir, KS_CKPT_CLEANER, &pl->cleaned, &pl->ncleaned, &ctx) !=
        KP_ERR_NONE) {
        pl->cleaned = NULL;
        pl->ncleaned = 0;
    }
    if (ks_flush_new(&pl->flush, &ctx) != KP_ERR_NONE ||
        kb_loop_add_fd(b->loop, ks_flush_eventfd(pl->flush), KB_EV_READ, on_flush_event, pl) !=
            KP_ERR_NONE) {
        snprintf(err, errlen, "cannot start the flush thread: %s", ctx.msg);
        return KP_ERR__IO;
    }
    pl->last_retention_ms = pl->last_checkpoint_ms = pl->last_clean_ms = kb_loop_now_ms(b->loop);
    kb_timer_init(&pl->tick, on_tick, pl);
    (void)kb_timer_arm(b->loop, &pl->tick, KB_PARTITION_LOG_TICK_MS);
    KB_LOG(KB_LL_INFO, KB_SUB_STORAGE, "msg=\"log dir opened\" dir=%s clean_shutdown=%s", dir,
           pl->was_clean ? "true" : "false");
    load_start(pl);
    return KP_ERR_NONE;
}

static void flush_log(kb_partition_log *pl, kb_topic *t, int32_t partition, ks_log *log)
{
    wait_idle(pl, log);
    kp_errctx ctx = {{0}, NULL, 0, 0};
    if (ks_log_flush(log, wall_ms(), &ctx) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"final flush failed\" topic=%s partition=%d "
               "detail=\"%s\"", t->name, partition, ctx.msg);
    else
        kb_producer_snapshot_save(&pl->io, log, t->partitions[partition].pids, ks_log_end_offset(log));
}

static void close_log(kb_partition_log *pl, kb_topic *t, int32_t partition, ks_log *log)
{
    (void)pl;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    if (ks_log_close(log, &ctx) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"closing log failed\" topic=%s partition=%d "
               "detail=\"%s\"", t->name, partition, ctx.msg);
    t->partitions[partition].log = NULL;
    kb_producer_state_free(t->partitions[partition].pids);
    t->partitions[partition].pids = NULL;
}

/* A clean stop: flush every log, record the checkpoints, close the logs,
 * then leave the clean-shutdown marker so the next start reads no data. */
void kb_partition_log_stop(kb_broker *b)
{
    kb_partition_log *pl = b->partition_logs;
    if (pl == NULL)
        return;
    kb_timer_disarm(b->loop, &pl->tick);
    load_stop(pl);
    clean_finish(pl, true);
    retention_reap(pl, true);
    for_each_open_log(pl, flush_log);
    ckpt_write_all(pl);
    for_each_open_log(pl, close_log);
    if (pl->flush != NULL) {
        drain_flushes(pl);
        kb_loop_del_fd(b->loop, ks_flush_eventfd(pl->flush));
        ks_flush_free(pl->flush, wall_ms());
    }
    while (pl->waiters != NULL) {
        durable_waiter *w = pl->waiters;
        pl->waiters = w->next;
        w->cb(w->arg, KP_ERR__IO);
        free(w);
    }
    kp_errctx ctx = {{0}, NULL, 0, 0};
    if (!pl->was_clean && pl->nunrecovered > 0)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"no clean-shutdown marker: partitions left "
               "unrecovered since the unclean stop\" partitions=%d", pl->nunrecovered);
    else if (ks_clean_shutdown_mark(&pl->io, log_dir(b), 0, &ctx) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"cannot write the clean-shutdown marker\" "
               "detail=\"%s\"", ctx.msg);
    ks_checkpoint_free(pl->recovery, pl->nrecovery);
    ks_checkpoint_free(pl->starts, pl->nstarts);
    ks_checkpoint_free(pl->cleaned, pl->ncleaned);
    ks_checkpoint_free(pl->hws, pl->nhws);
    while (pl->clean_skips != NULL) {
        clean_skip *s = pl->clean_skips;
        pl->clean_skips = s->next;
        free(s);
    }
    kb_retention_guard_free(pl->guard);
    free(pl);
    b->partition_logs = NULL;
}
