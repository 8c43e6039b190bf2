#include "kb_coord_load.h"

#include <stdlib.h>
#include <string.h>

#include "kb_log.h"
#include "kb_loop.h"
#include "kb_partition_log.h"
#include "kb_replica.h"
#include "kb_topics.h"

#define STEP_BYTES (1 << 20) /* read per turn of the loop */
#define RETRY_MS   20        /* while the log is still being opened */

struct kb_coord_load {
    kb_broker *b;
    char *topic;
    int32_t p;
    size_t max_batch;
    kb_scan_batch_cb *cb;
    kb_coord_load_done_fn *done;
    void *arg;
    kb_timer step;
    kb_hw_waiter hw;   /* linked while the ISR confirms the log end */
    kb_topic *hw_topic; /* the topic hw is linked on */
    int64_t next;      /* the first offset not yet replayed */
    int64_t batches;
};

static void finish(kb_coord_load *l, kp_err err)
{
    kb_coord_load_done_fn *done = l->done;
    void *arg = l->arg;
    int64_t n = l->batches;
    kb_timer_disarm(l->b->loop, &l->step);
    free(l->topic);
    free(l);
    done(arg, err, n);
}

static kp_err count_batch(void *arg, const kp_batch_hdr *h, const uint8_t *batch, size_t len)
{
    kb_coord_load *l = arg;
    l->batches++;
    return l->cb(l->arg, h, batch, len);
}

static void on_hw(kb_hw_waiter *w, int16_t err)
{
    kb_coord_load *l = w->arg;
    l->hw_topic = NULL;
    if (err != KP_ERR_NONE)
        finish(l, (kp_err)err);
    else
        (void)kb_timer_arm(l->b->loop, &l->step, 0);
}

/* One bounded step: replay up to STEP_BYTES below the high watermark, or
 * wait for the high watermark to reach the log end, or end. */
static void on_step(kb_loop *loop, void *arg)
{
    kb_coord_load *l = arg;
    kp_str name = kp_str_from(l->topic);
    if (kb_topics_busy(l->b->topics, name) != NULL) { /* its directories are being made */
        (void)kb_timer_arm(loop, &l->step, RETRY_MS);
        return;
    }
    kb_topic *t = kb_topics_find(l->b->topics, name);
    if (t == NULL || l->p >= t->npartitions) {
        finish(l, KP_ERR_UNKNOWN_TOPIC_OR_PARTITION);
        return;
    }
    if (kb_partition_log_loading(t, l->p)) {
        (void)kb_timer_arm(loop, &l->step, RETRY_MS);
        return;
    }
    ks_log *log;
    kp_err e = kb_partition_log_get(l->b, t, l->p, &log);
    if (e != KP_ERR_NONE) {
        finish(l, e);
        return;
    }
    int64_t hw = ks_log_high_watermark(log), end = ks_log_end_offset(log);
    if (l->next < ks_log_start_offset(log))
        l->next = ks_log_start_offset(log);
    if (l->next < hw) {
        int64_t next;
        e = kb_log_scan_batches_step(kb_partition_log_io(l->b), log, l->next, hw, STEP_BYTES,
                                     l->max_batch, count_batch, l, &next);
        if (e != KP_ERR_NONE) {
            finish(l, e);
            return;
        }
        l->next = next > l->next ? next : hw; /* none left below hw (compaction's gaps) */
        (void)kb_timer_arm(loop, &l->step, 0);
        return;
    }
    if (hw >= end) {
        finish(l, KP_ERR_NONE);
        return;
    }
    l->hw = (kb_hw_waiter){.offset = end, .fn = on_hw, .arg = l};
    if (kb_replica_wait_hw(t, l->p, &l->hw))
        l->hw_topic = t;
    else
        (void)kb_timer_arm(loop, &l->step, 0);
}

kb_coord_load *kb_coord_load_start(kb_broker *b, const char *topic, int32_t p, size_t max_batch,
                                   kb_scan_batch_cb *cb, kb_coord_load_done_fn *done, void *arg)
{
    kb_coord_load *l = calloc(1, sizeof(*l));
    if (l == NULL || (l->topic = strdup(topic)) == NULL) {
        free(l);
        return NULL;
    }
    l->b = b;
    l->p = p;
    l->max_batch = max_batch;
    l->cb = cb;
    l->done = done;
    l->arg = arg;
    kb_timer_init(&l->step, on_step, l);
    (void)kb_timer_arm(b->loop, &l->step, 0);
    return l;
}

void kb_coord_load_cancel(kb_coord_load *l)
{
    if (l == NULL)
        return;
    if (l->hw_topic != NULL && l->hw.linked)
        kb_replica_wait_cancel(l->hw_topic, l->p, &l->hw);
    kb_timer_disarm(l->b->loop, &l->step);
    free(l->topic);
    free(l);
}

/* ---- the partitions a coordinator owns ---------------------------------- */

enum { CP_NONE = 0, CP_LOADING = 1, CP_LOADED = 2, CP_FAILED = 3 };

typedef struct cp_load {
    kb_coord_parts *cp;
    kb_coord_load *l;
    int32_t p;
    void *ld;
    int64_t started_ms;
} cp_load;

static kp_err cp_batch(void *arg, const kp_batch_hdr *h, const uint8_t *batch, size_t len)
{
    cp_load *x = arg;
    return x->cp->batch(x->ld, h, batch, len);
}

/* Grows the table to hold partition p; false when out of memory. */
static bool cp_reserve(kb_coord_parts *cp, int32_t p)
{
    if (p < cp->n)
        return true;
    int32_t n = p + 1;
    uint8_t *st = realloc(cp->state, (size_t)n);
    if (st == NULL)
        return false;
    cp->state = st;
    cp_load **ls = realloc(cp->loads, (size_t)n * sizeof(*ls));
    if (ls == NULL)
        return false;
    cp->loads = ls;
    for (int32_t i = cp->n; i < n; i++) {
        cp->state[i] = CP_NONE;
        cp->loads[i] = NULL;
    }
    cp->n = n;
    return true;
}

static void cp_done(void *arg, kp_err err, int64_t batches)
{
    cp_load *x = arg;
    kb_coord_parts *cp = x->cp;
    int32_t p = x->p;
    int64_t ms = kb_loop_now_ms(cp->b->loop) - x->started_ms;
    cp->loads[p] = NULL;
    cp->state[p] = err == KP_ERR_NONE ? CP_LOADED : CP_FAILED;
    if (err == KP_ERR_NONE)
        KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"coordinator partition loaded\" topic=%s "
               "partition=%d batches=%lld ms=%lld", cp->topic, p, (long long)batches,
               (long long)ms);
    else if (err != KP_ERR_NOT_LEADER_OR_FOLLOWER)
        KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"cannot load a coordinator partition\" "
               "topic=%s partition=%d error=%s", cp->topic, p, kp_err_name(err));
    cp->loaded(cp->arg, x->ld, p, err);
    free(x);
}

void kb_coord_parts_move(kb_coord_parts *cp, int32_t p, bool leads)
{
    if (cp != NULL && leads)
        kb_coord_parts_elected(cp, p);
    else if (cp != NULL)
        kb_coord_parts_resigned(cp, p);
}

void kb_coord_parts_elected(kb_coord_parts *cp, int32_t p)
{
    if (p < 0 || !cp_reserve(cp, p) || cp->state[p] == CP_LOADING || cp->state[p] == CP_LOADED)
        return;
    cp_load *x = calloc(1, sizeof(*x));
    if (x != NULL && (x->ld = cp->begin(cp->arg, p)) == NULL) {
        free(x);
        x = NULL;
    }
    if (x != NULL) {
        x->cp = cp;
        x->p = p;
        x->started_ms = kb_loop_now_ms(cp->b->loop);
        kb_coord_load *l = kb_coord_load_start(cp->b, cp->topic, p, cp->max_batch, cp_batch,
                                               cp_done, x);
        if (l != NULL) {
            cp->state[p] = CP_LOADING;
            cp->loads[p] = x;
            x->l = l;
            return;
        }
        cp->loaded(cp->arg, x->ld, p, KP_ERR__NOMEM);
        free(x);
    }
    cp->state[p] = CP_FAILED;
}

void kb_coord_parts_resigned(kb_coord_parts *cp, int32_t p)
{
    if (p < 0 || p >= cp->n || cp->state[p] == CP_NONE)
        return;
    cp_load *x = cp->loads[p];
    cp->loads[p] = NULL;
    if (x != NULL) {
        kb_coord_load_cancel(x->l);
        cp->loaded(cp->arg, x->ld, p, KP_ERR_NOT_COORDINATOR);
        free(x);
    } else if (cp->state[p] == CP_LOADED) {
        cp->unload(cp->arg, p);
    }
    cp->state[p] = CP_NONE;
}

int16_t kb_coord_parts_check(const kb_coord_parts *cp, int32_t p)
{
    if (cp == NULL)
        return KP_ERR_NONE;
    if (p < 0 || p >= cp->n || cp->state[p] == CP_NONE || cp->state[p] == CP_LOADING)
        return KP_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    return cp->state[p] == CP_LOADED ? KP_ERR_NONE : KP_ERR_COORDINATOR_NOT_AVAILABLE;
}

bool kb_coord_parts_loading(const kb_coord_parts *cp, int32_t p)
{
    return p >= 0 && p < cp->n && cp->state[p] == CP_LOADING;
}

void kb_coord_parts_fini(kb_coord_parts *cp)
{
    for (int32_t p = 0; p < cp->n; p++) {
        cp_load *x = cp->loads[p];
        if (x == NULL)
            continue;
        kb_coord_load_cancel(x->l);
        cp->loaded(cp->arg, x->ld, p, KP_ERR_NOT_COORDINATOR);
        free(x);
    }
    free(cp->state);
    free(cp->loads);
    cp->state = NULL;
    cp->loads = NULL;
    cp->n = 0;
}
