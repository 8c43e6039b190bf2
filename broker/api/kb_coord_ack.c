#include "kb_coord_ack.h"

#include <stdlib.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_loop.h"
#include "kb_replica.h"
#include "kb_offsets.h"
#include "kb_topic_settings.h"
#include "kb_txn_coord.h"

#define TXN_WRITE_TIMEOUT_MS 30000 /* Kafka's transaction coordinator: request.timeout.ms */

typedef struct ack_wait {
    kb_req *req;
    kb_topic *t;
    int32_t p;
    kb_hw_waiter hw;
    kb_timer timeout;
    kb_coord_ack_fail_fn *fail;
} ack_wait;

static int16_t coordinator_error(int16_t err)
{
    switch (err) {
    case KP_ERR_NONE:
        return KP_ERR_NONE;
    case KP_ERR_NOT_LEADER_OR_FOLLOWER:
        return KP_ERR_NOT_COORDINATOR;
    default: /* NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT */
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    }
}

static bool isr_short(kb_req *req, kb_topic *t, int32_t p)
{
    const kb_replica *r = t->partitions[p].repl;
    return r != NULL && r->nisr < kb_topic_settings_of(req->broker->cfg, t)->min_insync_replicas;
}

int16_t kb_coord_ack_check(kb_req *req, kb_topic *t, int32_t p)
{
    return isr_short(req, t, p) ? coordinator_error(KP_ERR_NOT_ENOUGH_REPLICAS) : KP_ERR_NONE;
}

/* Ends the wait with err (0: the ISR has the records) and answers. */
static void ack_end(ack_wait *w, int16_t err)
{
    kb_req *req = w->req;
    kb_timer_disarm(req->broker->loop, &w->timeout);
    if (w->hw.linked)
        kb_replica_wait_cancel(w->t, w->p, &w->hw);
    if (err == KP_ERR_NONE && isr_short(req, w->t, w->p))
        err = KP_ERR_NOT_ENOUGH_REPLICAS_AFTER_APPEND;
    if (err != KP_ERR_NONE)
        w->fail(req, coordinator_error(err));
    req->park_state = NULL;
    req->on_cancel = NULL;
    free(w);
    kb_req_finish(req);
}

static void on_hw(kb_hw_waiter *hw, int16_t err)
{
    ack_end(hw->arg, err);
}

static void on_timeout(kb_loop *loop, void *arg)
{
    (void)loop;
    ack_end(arg, KP_ERR_REQUEST_TIMED_OUT);
}

static void on_cancel(kb_req *req)
{
    ack_wait *w = req->park_state;
    kb_timer_disarm(req->broker->loop, &w->timeout);
    if (w->hw.linked)
        kb_replica_wait_cancel(w->t, w->p, &w->hw);
    free(w);
}

kp_err kb_coord_ack_wait(kb_req *req, kb_topic *t, int32_t p, int32_t timeout_ms,
                         kb_coord_ack_fail_fn *fail)
{
    ks_log *log = t->partitions[p].log;
    if (t->partitions[p].repl == NULL || log == NULL)
        return KP_ERR_NONE;
    ack_wait *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        fail(req, KP_ERR_COORDINATOR_NOT_AVAILABLE);
        return KP_ERR_NONE;
    }
    *w = (ack_wait){.req = req, .t = t, .p = p, .fail = fail};
    w->hw = (kb_hw_waiter){.offset = ks_log_end_offset(log), .fn = on_hw, .arg = w};
    if (!kb_replica_wait_hw(t, p, &w->hw)) {
        free(w); /* the ISR has it already */
        return KP_ERR_NONE;
    }
    kb_timer_init(&w->timeout, on_timeout, w);
    (void)kb_timer_arm(req->broker->loop, &w->timeout, timeout_ms);
    req->park_state = w;
    req->on_cancel = on_cancel;
    return KB_PARKED;
}

kp_err kb_coord_ack_txn(kb_req *req, kp_str id, kb_coord_ack_fail_fn *fail)
{
    kb_topic *t = kb_topics_find(req->broker->topics, KP_STR_LIT(KB_TXN_COORD_STATE_TOPIC));
    if (t == NULL || t->npartitions <= 0)
        return KP_ERR_NONE;
    return kb_coord_ack_wait(req, t, kb_offsets_partition_for(id, t->npartitions),
                             TXN_WRITE_TIMEOUT_MS, fail);
}
