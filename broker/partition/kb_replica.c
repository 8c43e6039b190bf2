#include "kb_replica.h"

#include <stdlib.h>
#include <string.h>

#include "kb_log.h"
#include "kb_loop.h"
#include "ks_log.h"

static kb_replica *replica_of(kb_topic *t, int32_t p)
{
    return p >= 0 && p < t->npartitions ? t->partitions[p].repl : NULL;
}

bool kb_replica_is_leader(const kb_replica *r)
{
    return r != NULL && r->leader == r->node_id;
}

static bool ids_have(const int32_t *v, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (v[i] == id)
            return true;
    return false;
}

bool kb_replica_in_set(const kb_replica *r, int32_t id)
{
    for (int32_t i = 0; r != NULL && i < r->nfollowers; i++)
        if (r->followers[i].id == id)
            return true;
    return false;
}

static void unlink_waiter(kb_replica *r, kb_hw_waiter *w)
{
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        r->waiters = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    w->next = w->prev = NULL;
    w->linked = false;
}

/* Calls the waiters at or below hw (all of them, with err, when err != 0). */
static void call_waiters(kb_replica *r, int64_t hw, int16_t err)
{
    kb_hw_waiter *w = r->waiters;
    while (w != NULL) {
        kb_hw_waiter *next = w->next;
        if (err != 0 || w->offset <= hw) {
            unlink_waiter(r, w);
            w->fn(w, err);
        }
        w = next;
    }
}

void kb_replica_free(kb_replica *r)
{
    if (r == NULL)
        return;
    call_waiters(r, 0, KP_ERR_NOT_LEADER_OR_FOLLOWER);
    free(r->isr);
    free(r->pending_isr);
    free(r->followers);
    free(r);
}

/* The followers of the new assignment, keeping what is known of each one
 * while this broker stays leader at the same epoch. */
static kb_replica_follower *followers_of(const kb_replica *r, const kb_replica_assignment *a,
                                         bool keep, int64_t now_ms, int32_t *n)
{
    kb_replica_follower *v = calloc((size_t)(a->nreplicas > 0 ? a->nreplicas : 0) + 1, sizeof(*v));
    *n = 0;
    for (int32_t i = 0; v != NULL && i < a->nreplicas; i++) {
        if (a->replicas[i] == r->node_id || ids_have(a->replicas, i, a->replicas[i]))
            continue;
        /* A new leader counts its ISR as caught up now (Kafka resets
         * lastCaughtUpTimeMs so), the others as never. */
        bool in_isr = a->isr != NULL && ids_have(a->isr, a->nisr, a->replicas[i]);
        kb_replica_follower f = {a->replicas[i], -1, in_isr ? now_ms : 0, 0, -1};
        for (int32_t j = 0; keep && j < r->nfollowers; j++)
            if (r->followers[j].id == f.id)
                f = r->followers[j];
        v[(*n)++] = f;
    }
    return v;
}

kp_err kb_replica_assign(kb_broker *b, kb_topic *t, int32_t p, const kb_replica_assignment *a)
{
    if (p < 0 || p >= t->npartitions)
        return KP_ERR__INVAL;
    kb_replica *r = t->partitions[p].repl;
    if (r == NULL) {
        if ((r = calloc(1, sizeof(*r))) == NULL)
            return KP_ERR__NOMEM;
        r->node_id = b->node_id;
        r->leader = -1;
        r->leader_epoch = -1;
        t->partitions[p].repl = r;
    }
    bool was_leader = kb_replica_is_leader(r);
    bool keep = was_leader && a->leader == r->node_id && a->leader_epoch == r->leader_epoch;
    int64_t now = b->loop != NULL ? kb_loop_now_ms(b->loop) : 0;
    int32_t nf = 0;
    kb_replica_follower *f = followers_of(r, a, keep, now, &nf);
    int32_t *isr = calloc((size_t)(a->nisr > 0 ? a->nisr : 0) + 1, sizeof(*isr));
    if (f == NULL || isr == NULL) {
        free(f);
        free(isr);
        return KP_ERR__NOMEM;
    }
    int32_t nisr = a->isr != NULL && a->nisr > 0 ? a->nisr : 0;
    if (nisr > 0)
        memcpy(isr, a->isr, (size_t)nisr * sizeof(*isr));
    free(r->followers);
    free(r->isr);
    r->followers = f;
    r->nfollowers = nf;
    r->isr = isr;
    r->nisr = nisr;
    if (!keep || a->partition_epoch != r->partition_epoch) {
        /* the image moved (or leadership did): any proposal is over */
        r->pending = r->stale = false;
        r->npending = 0;
        r->hold_until_ms = 0;
    }
    if (!keep && a->leader == r->node_id) {
        ks_log *log = t->partitions[p].log;
        r->epoch_start_offset = log != NULL ? ks_log_end_offset(log) : 0;
    }
    r->leader = a->leader;
    r->leader_epoch = a->leader_epoch;
    r->partition_epoch = a->partition_epoch;
    r->on_isr = a->on_isr;
    r->on_isr_arg = a->on_isr_arg;
    if (was_leader && !kb_replica_is_leader(r))
        call_waiters(r, 0, KP_ERR_NOT_LEADER_OR_FOLLOWER);
    kb_replica_leader_epoch_start(t, p);
    (void)kb_replica_advance_hw(b, t, p);
    return KP_ERR_NONE;
}

/* A member of the maximal ISR: the committed one and any proposed. */
static bool in_maximal_isr(const kb_replica *r, int32_t id)
{
    return ids_have(r->isr, r->nisr, id) ||
           (r->pending && ids_have(r->pending_isr, r->npending, id));
}

/* The smallest log end over the maximal ISR, or -1 when a member is
 * unknown. */
static int64_t isr_min_leo(const kb_replica *r, int64_t own)
{
    int64_t min = own;
    for (int32_t i = 0; i < r->nfollowers; i++) {
        if (!in_maximal_isr(r, r->followers[i].id))
            continue;
        if (r->followers[i].leo < 0)
            return -1;
        if (r->followers[i].leo < min)
            min = r->followers[i].leo;
    }
    return min;
}

bool kb_replica_advance_hw(kb_broker *b, kb_topic *t, int32_t p)
{
    (void)b;
    ks_log *log = p >= 0 && p < t->npartitions ? t->partitions[p].log : NULL;
    if (log == NULL)
        return false;
    kb_replica *r = t->partitions[p].repl;
    if (r != NULL && !kb_replica_is_leader(r))
        return false;
    int64_t old = ks_log_high_watermark(log);
    int64_t hw = r == NULL ? ks_log_end_offset(log) : isr_min_leo(r, ks_log_end_offset(log));
    if (hw <= old)
        return false;
    ks_log_set_high_watermark(log, hw);
    if (r != NULL)
        call_waiters(r, ks_log_high_watermark(log), 0);
    return true;
}

bool kb_replica_follower_fetched(kb_broker *b, kb_topic *t, int32_t p, int32_t id,
                                 int64_t offset, int64_t now_ms)
{
    kb_replica *r = replica_of(t, p);
    ks_log *log = t->partitions[p].log;
    if (!kb_replica_is_leader(r) || log == NULL)
        return false;
    kb_replica_follower *f = NULL;
    for (int32_t i = 0; i < r->nfollowers; i++)
        if (r->followers[i].id == id)
            f = &r->followers[i];
    if (f == NULL)
        return false;
    /* Caught up: at the leader's end now, or at least where the leader's
     * end was at the previous fetch, which then counts (Kafka's rule). */
    int64_t end = ks_log_end_offset(log);
    f->leo = offset;
    if (offset >= end)
        f->caught_up_ms = now_ms;
    else if (f->last_fetch_leader_leo >= 0 && offset >= f->last_fetch_leader_leo &&
             f->last_fetch_ms > f->caught_up_ms)
        f->caught_up_ms = f->last_fetch_ms;
    f->last_fetch_ms = now_ms;
    f->last_fetch_leader_leo = end;
    bool moved = kb_replica_advance_hw(b, t, p);
    if (r->on_isr != NULL && !r->pending && !r->stale && !ids_have(r->isr, r->nisr, id) &&
        offset >= ks_log_high_watermark(log) && offset >= r->epoch_start_offset)
        r->on_isr(r->on_isr_arg, t, p);
    return moved;
}

int32_t kb_replica_isr_propose(const kb_replica *r, const ks_log *log, int64_t now_ms,
                               int64_t lag_ms, kb_replica_eligible_fn *eligible, void *arg,
                               int32_t *out, int32_t cap)
{
    if (!kb_replica_is_leader(r) || log == NULL || r->pending || r->stale ||
        now_ms < r->hold_until_ms || cap < r->nfollowers + 1)
        return 0;
    int64_t end = ks_log_end_offset(log), hw = ks_log_high_watermark(log);
    int32_t n = 0;
    bool changed = !ids_have(r->isr, r->nisr, r->node_id);
    out[n++] = r->node_id;
    for (int32_t i = 0; i < r->nfollowers; i++) {
        const kb_replica_follower *f = &r->followers[i];
        bool in = ids_have(r->isr, r->nisr, f->id);
        bool keep;
        if (in)
            keep = f->leo == end || now_ms - f->caught_up_ms <= lag_ms;
        else
            keep = f->leo >= 0 && f->leo >= hw && f->leo >= r->epoch_start_offset &&
                   (eligible == NULL || eligible(arg, f->id));
        if (keep)
            out[n++] = f->id;
        if (keep != in)
            changed = true;
    }
    return changed ? n : 0;
}

kp_err kb_replica_isr_pending(kb_replica *r, const int32_t *isr, int32_t n)
{
    int32_t *v = realloc(r->pending_isr, (size_t)(n > 0 ? n : 1) * sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    if (n > 0)
        memcpy(v, isr, (size_t)n * sizeof(*v));
    r->pending_isr = v;
    r->npending = n;
    r->pending = true;
    return KP_ERR_NONE;
}

void kb_replica_isr_drop(kb_replica *r, bool stale, int64_t hold_until_ms)
{
    r->pending = false;
    r->npending = 0;
    r->stale = stale;
    r->hold_until_ms = hold_until_ms;
}

void kb_replica_leader_epoch_start(kb_topic *t, int32_t p)
{
    kb_replica *r = replica_of(t, p);
    ks_log *log = t->partitions[p].log;
    if (!kb_replica_is_leader(r) || log == NULL || r->leader_epoch < 0 ||
        ks_log_latest_epoch(log) >= r->leader_epoch)
        return;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    if (ks_log_assign_epoch(log, r->leader_epoch, ks_log_end_offset(log), &ctx) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"cannot record a leader epoch\" topic=%s "
               "partition=%d leader_epoch=%d detail=\"%s\"", t->name, p, r->leader_epoch, ctx.msg);
}

void kb_replica_follow_hw(kb_topic *t, int32_t p, int64_t leader_hw)
{
    ks_log *log = p >= 0 && p < t->npartitions ? t->partitions[p].log : NULL;
    if (log == NULL || leader_hw <= ks_log_high_watermark(log))
        return;
    ks_log_set_high_watermark(log, leader_hw); /* capped by the log end */
}

bool kb_replica_wait_hw(kb_topic *t, int32_t p, kb_hw_waiter *w)
{
    kb_replica *r = replica_of(t, p);
    ks_log *log = t->partitions[p].log;
    if (r == NULL || log == NULL || ks_log_high_watermark(log) >= w->offset)
        return false;
    w->prev = NULL;
    w->next = r->waiters;
    if (r->waiters != NULL)
        r->waiters->prev = w;
    r->waiters = w;
    w->linked = true;
    return true;
}

void kb_replica_wait_cancel(kb_topic *t, int32_t p, kb_hw_waiter *w)
{
    if (w->linked)
        unlink_waiter(t->partitions[p].repl, w);
}
