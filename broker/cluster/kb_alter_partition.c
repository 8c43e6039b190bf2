#include "kb_alter_partition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_ctrl_conn.h"
#include "kb_log.h"
#include "kb_loop.h"
#include "kb_replica.h"
#include "kb_uuid.h"
#include "kp_msg.h"

#define ALTER_PARTITION_VERSION 3
#define RETRY_BACKOFF_MS 100 /* Kafka's retry.backoff.ms */
#define HOLD_MS 1000         /* a refused proposal is not made again sooner */
#define PUMP_MS 100
#define SCAN_MIN_MS 50
#define MAX_BATCH 1024 /* proposals in one request; more go in the next */
#define ISR_TEXT 256

/* One proposal: the ISR asked for (t, p) at the epochs the image had. */
typedef struct ap_item {
    struct ap_item *next;
    kp_uuid topic_id;
    int32_t partition;
    int32_t leader_epoch;
    int32_t partition_epoch;
    int32_t *isr;
    int32_t nisr;
    bool sent;
    int64_t retry_at_ms;
} ap_item;

struct kb_alter_partition {
    kb_broker *b;
    kb_quorum *q;
    const kb_meta_image *img;
    kb_ctrl_conn *conn;
    int target; /* the quorum node conn talks to, -1: none */
    int64_t broker_epoch;
    int64_t lag_ms;
    ap_item *head;
    int n;
    bool in_flight;
    int64_t sent_at_ms;
    kb_timer scan, pump_timer;
};

static void pump(kb_alter_partition *ap);

static void isr_text(const int32_t *v, int32_t n, char *out, size_t cap)
{
    size_t len = 0;
    out[0] = '\0';
    for (int32_t i = 0; i < n && len + 16 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, i ? ",%d" : "%d", v[i]);
}

static void item_free(ap_item *it)
{
    free(it->isr);
    free(it);
}

static void unlink_item(kb_alter_partition *ap, ap_item *it)
{
    for (ap_item **pp = &ap->head; *pp != NULL; pp = &(*pp)->next)
        if (*pp == it) {
            *pp = it->next;
            ap->n--;
            item_free(it);
            return;
        }
}

static bool has_item(const kb_alter_partition *ap, const kp_uuid *id, int32_t p)
{
    for (const ap_item *it = ap->head; it != NULL; it = it->next)
        if (it->partition == p && memcmp(it->topic_id.b, id->b, sizeof(id->b)) == 0)
            return true;
    return false;
}

/* ---- proposals ------------------------------------------------------------ */

/* A broker the controller would take into an ISR (Kafka's
 * isReplicaIsrEligible): registered, unfenced, not shutting down. */
static bool eligible(void *arg, int32_t id)
{
    const kb_alter_partition *ap = arg;
    const kb_mi_broker *br = kb_meta_image_broker(ap->img, id);
    return br != NULL && !br->fenced && !br->in_controlled_shutdown;
}

void kb_alter_partition_check(void *arg, kb_topic *t, int32_t p)
{
    kb_alter_partition *ap = arg;
    if (ap == NULL || p < 0 || p >= t->npartitions || ap->broker_epoch < 0)
        return;
    kb_replica *r = t->partitions[p].repl;
    ks_log *log = t->partitions[p].log;
    if (!kb_replica_is_leader(r) || log == NULL || has_item(ap, &t->id, p))
        return;
    int32_t cap = r->nfollowers + 1;
    int32_t *isr = calloc((size_t)cap, sizeof(*isr));
    ap_item *it = calloc(1, sizeof(*it));
    int32_t n = isr != NULL && it != NULL
                    ? kb_replica_isr_propose(r, log, kb_loop_now_ms(ap->b->loop), ap->lag_ms,
                                             eligible, ap, isr, cap)
                    : 0;
    if (n == 0 || kb_replica_isr_pending(r, isr, n) != KP_ERR_NONE) {
        free(isr);
        free(it);
        return;
    }
    *it = (ap_item){.topic_id = t->id, .partition = p, .leader_epoch = r->leader_epoch,
                    .partition_epoch = r->partition_epoch, .isr = isr, .nisr = n};
    it->next = ap->head;
    ap->head = it;
    ap->n++;
    char from[ISR_TEXT], to[ISR_TEXT];
    isr_text(r->isr, r->nisr, from, sizeof from);
    isr_text(isr, n, to, sizeof to);
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"%s the ISR\" topic=%s partition=%d isr=%s "
           "proposed=%s leader_epoch=%d partition_epoch=%d high_watermark=%lld end_offset=%lld",
           n < r->nisr ? "shrinking" : n > r->nisr ? "expanding" : "changing", t->name, p, from,
           to, r->leader_epoch, r->partition_epoch, (long long)ks_log_high_watermark(log),
           (long long)ks_log_end_offset(log));
    pump(ap);
}

/* Every partition this broker leads, for followers that fell behind. */
static void on_scan(kb_loop *loop, void *arg)
{
    kb_alter_partition *ap = arg;
    int32_t me = ap->b->node_id;
    for (int i = 0; i < ap->img->topics.n; i++) {
        const kb_mi_topic *mt = ap->img->topics.v[i];
        kb_topic *t = NULL;
        for (int32_t p = 0; p < mt->n_parts; p++) {
            if (!mt->parts[p].present || mt->parts[p].leader != me)
                continue;
            if (t == NULL && (t = kb_topics_find_id(ap->b->topics, &mt->id)) == NULL)
                break;
            kb_alter_partition_check(ap, t, p);
        }
    }
    int64_t every = ap->lag_ms / 2 > SCAN_MIN_MS ? ap->lag_ms / 2 : SCAN_MIN_MS;
    (void)kb_timer_arm(loop, &ap->scan, every > INT32_MAX ? INT32_MAX : (int)every);
}

/* ---- the controller's answer ---------------------------------------------- */

/* The replica of an item, if it still holds the proposal the item made. */
static kb_replica *replica_of(kb_alter_partition *ap, const ap_item *it, kb_topic **tp)
{
    kb_topic *t = kb_topics_find_id(ap->b->topics, &it->topic_id);
    kb_replica *r = t != NULL && it->partition < t->npartitions ? t->partitions[it->partition].repl
                                                                 : NULL;
    *tp = t;
    if (!kb_replica_is_leader(r) || !r->pending || r->leader_epoch != it->leader_epoch ||
        r->partition_epoch != it->partition_epoch)
        return NULL;
    return r;
}

static void send_again(kb_alter_partition *ap, ap_item *it)
{
    it->sent = false;
    it->retry_at_ms = kb_loop_now_ms(ap->b->loop) + RETRY_BACKOFF_MS;
}

/* One partition's answer; false when the item is to be sent again. */
static bool partition_answered(kb_alter_partition *ap, ap_item *it,
                               const kp_alter_partition_resp_partition_data *rp)
{
    kb_topic *t;
    kb_replica *r = replica_of(ap, it, &t);
    const char *name = t != NULL ? t->name : "-";
    int16_t code = rp->error_code;
    char isr[ISR_TEXT];
    switch (code) {
    case KP_ERR_NONE:
        isr_text(rp->isr.v, rp->isr.n > 0 ? rp->isr.n : 0, isr, sizeof isr);
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"the controller accepted the ISR\" topic=%s "
               "partition=%d isr=%s partition_epoch=%d", name, it->partition, isr,
               rp->partition_epoch);
        /* the image brings it (and ends the proposal); unless it is there */
        if (r != NULL && rp->partition_epoch <= r->partition_epoch)
            kb_replica_isr_drop(r, false, 0);
        return true;
    case KP_ERR_OPERATION_NOT_ATTEMPTED:
    case KP_ERR_INELIGIBLE_REPLICA:
        if (r != NULL)
            kb_replica_isr_drop(r, false, kb_loop_now_ms(ap->b->loop) + HOLD_MS);
        break;
    case KP_ERR_INVALID_UPDATE_VERSION:
    case KP_ERR_FENCED_LEADER_EPOCH:
    case KP_ERR_NOT_LEADER_OR_FOLLOWER:
    case KP_ERR_NEW_LEADER_ELECTED:
    case KP_ERR_UNKNOWN_TOPIC_OR_PARTITION:
    case KP_ERR_UNKNOWN_TOPIC_ID:
        if (r != NULL)
            kb_replica_isr_drop(r, true, 0); /* the image decides what comes next */
        break;
    default:
        if (r == NULL)
            return true; /* the image moved on: nothing to send again */
        KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN, "msg=\"AlterPartition again\" topic=%s partition=%d "
               "error=%s", name, it->partition, kp_err_name(code));
        return false;
    }
    KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"the controller refused the ISR change\" topic=%s "
           "partition=%d error=%s leader_epoch=%d partition_epoch=%d", name, it->partition,
           kp_err_name(code), it->leader_epoch, it->partition_epoch);
    return true;
}

static const kp_alter_partition_resp_partition_data *
find_answer(const kp_alter_partition_resp *rs, const ap_item *it)
{
    for (int32_t i = 0; i < rs->topics.n; i++) {
        const kp_alter_partition_resp_topic_data *td = &rs->topics.v[i];
        if (memcmp(td->topic_id.b, it->topic_id.b, sizeof(it->topic_id.b)) != 0)
            continue;
        for (int32_t j = 0; j < td->partitions.n; j++)
            if (td->partitions.v[j].partition_index == it->partition)
                return &td->partitions.v[j];
    }
    return NULL;
}

static void all_again(kb_alter_partition *ap, const char *why)
{
    char addr[300];
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"AlterPartition again\" why=\"%s\" controller=%s", why,
           kb_quorum_addr(ap->q, ap->target, addr, sizeof addr));
    for (ap_item *it = ap->head; it != NULL; it = it->next)
        if (it->sent)
            send_again(ap, it);
}

static void on_reply(void *arg, kp_reader *body)
{
    kb_alter_partition *ap = arg;
    ap->in_flight = false;
    kp_arena a;
    kp_arena_init(&a);
    kp_alter_partition_resp rs;
    kp_err e = body == NULL ? KP_ERR__IO
                            : kp_alter_partition_resp_decode(body, &a, &rs, ALTER_PARTITION_VERSION);
    if (e != KP_ERR_NONE) {
        ap->target = -1; /* a lost connection is closed already */
        all_again(ap, e == KP_ERR__IO ? "controller connection lost" : "malformed response");
    } else if (rs.error_code != KP_ERR_NONE) {
        if (rs.error_code == KP_ERR_NOT_CONTROLLER) {
            kb_quorum_forget_leader(ap->q);
            kb_ctrl_conn_close(ap->conn);
            ap->target = -1;
        }
        all_again(ap, kp_err_name(rs.error_code));
    } else {
        for (ap_item *it = ap->head, *next; it != NULL; it = next) {
            next = it->next;
            if (!it->sent)
                continue;
            const kp_alter_partition_resp_partition_data *rp = find_answer(&rs, it);
            kp_alter_partition_resp_partition_data none = {.error_code = KP_ERR_UNKNOWN_SERVER_ERROR};
            if (partition_answered(ap, it, rp != NULL ? rp : &none))
                unlink_item(ap, it);
            else
                send_again(ap, it);
        }
    }
    kp_arena_fini(&a);
    pump(ap);
}

/* ---- sending -------------------------------------------------------------- */

static void encode_request(kp_writer *w, const void *msg, int16_t version)
{
    kp_alter_partition_req_encode(w, msg, version);
}

static bool connected(kb_alter_partition *ap)
{
    if (kb_ctrl_conn_is_open(ap->conn) && ap->target >= 0 &&
        (ap->q->leader < 0 || ap->q->leader == ap->target))
        return true;
    ap->target = kb_quorum_pick(ap->q);
    const kb_ctrl_node *node = &ap->q->v[ap->target];
    return kb_ctrl_conn_open(ap->conn, node->host, node->port) == KP_ERR_NONE;
}

/* The epoch the controller registered broker id with, -1 if unknown. */
static int64_t epoch_of(const kb_alter_partition *ap, int32_t id)
{
    if (id == ap->b->node_id)
        return ap->broker_epoch;
    const kb_mi_broker *br = kb_meta_image_broker(ap->img, id);
    return br != NULL ? br->epoch : -1;
}

/* Items whose partition the image moved past (or that this broker no
 * longer leads) are dropped before sending. */
static void drop_outdated(kb_alter_partition *ap)
{
    for (ap_item *it = ap->head, *next; it != NULL; it = next) {
        next = it->next;
        kb_topic *t;
        if (!it->sent && replica_of(ap, it, &t) == NULL)
            unlink_item(ap, it);
    }
}

/* The request for the items due: one TopicData per topic. */
static int build(kb_alter_partition *ap, kp_arena *a, kp_alter_partition_req *rq, int64_t now)
{
    kp_alter_partition_req_defaults(rq);
    rq->broker_id = ap->b->node_id;
    rq->broker_epoch = ap->broker_epoch;
    int due = 0;
    for (ap_item *it = ap->head; it != NULL; it = it->next)
        due += !it->sent && it->retry_at_ms <= now;
    if (due == 0)
        return 0;
    due = due < MAX_BATCH ? due : MAX_BATCH;
    rq->topics.v = kp_arena_alloc(a, (size_t)due * sizeof(*rq->topics.v));
    kp_alter_partition_req_partition_data *parts = kp_arena_alloc(a, (size_t)due * sizeof(*parts));
    if (rq->topics.v == NULL || parts == NULL)
        return 0;
    rq->topics.n = 0;
    int np = 0;
    for (ap_item *it = ap->head; it != NULL && np < due; it = it->next) {
        if (it->sent || it->retry_at_ms > now)
            continue;
        kp_alter_partition_req_broker_state *bs =
            kp_arena_alloc(a, (size_t)it->nisr * sizeof(*bs) + 1);
        if (bs == NULL)
            return 0;
        for (int32_t i = 0; i < it->nisr; i++)
            bs[i] = (kp_alter_partition_req_broker_state){it->isr[i], epoch_of(ap, it->isr[i])};
        kp_alter_partition_req_partition_data *pd = &parts[np++];
        kp_alter_partition_req_partition_data_defaults(pd);
        pd->partition_index = it->partition;
        pd->leader_epoch = it->leader_epoch;
        pd->new_isr_with_epochs.n = it->nisr;
        pd->new_isr_with_epochs.v = bs;
        pd->leader_recovery_state = 0; /* RECOVERED */
        pd->partition_epoch = it->partition_epoch;
        kp_alter_partition_req_topic_data *td = NULL;
        for (int32_t i = 0; i < rq->topics.n; i++)
            if (memcmp(rq->topics.v[i].topic_id.b, it->topic_id.b, sizeof(it->topic_id.b)) == 0)
                td = &rq->topics.v[i];
        if (td == NULL) {
            td = &rq->topics.v[rq->topics.n++];
            kp_alter_partition_req_topic_data_defaults(td);
            td->topic_id = it->topic_id;
            td->partitions.v = kp_arena_alloc(a, (size_t)due * sizeof(*td->partitions.v));
            td->partitions.n = 0;
            if (td->partitions.v == NULL)
                return 0;
        }
        td->partitions.v[td->partitions.n++] = *pd;
        it->sent = true;
    }
    return np;
}

static void pump(kb_alter_partition *ap)
{
    int64_t now = kb_loop_now_ms(ap->b->loop);
    if (ap->in_flight && now - ap->sent_at_ms > KB_ALTER_PARTITION_TIMEOUT_MS)
        kb_ctrl_conn_close(ap->conn); /* its callback sends them again */
    if (!ap->in_flight && ap->broker_epoch >= 0) {
        drop_outdated(ap);
        kp_arena a;
        kp_arena_init(&a);
        kp_alter_partition_req rq;
        bool due = false;
        for (ap_item *it = ap->head; it != NULL && !due; it = it->next)
            due = !it->sent && it->retry_at_ms <= now;
        if (due && connected(ap)) {
            if (build(ap, &a, &rq, now) > 0 &&
                kb_ctrl_conn_send(ap->conn, KP_API_ALTER_PARTITION, ALTER_PARTITION_VERSION,
                                  encode_request, &rq, on_reply, ap) == KP_ERR_NONE) {
                ap->in_flight = true;
                ap->sent_at_ms = now;
            } else {
                all_again(ap, "cannot send to the controller"); /* nothing went out */
            }
        }
        kp_arena_fini(&a);
    }
    if (ap->n > 0 && !kb_timer_armed(&ap->pump_timer))
        (void)kb_timer_arm(ap->b->loop, &ap->pump_timer, PUMP_MS);
}

static void on_pump(kb_loop *loop, void *arg)
{
    (void)loop;
    pump(arg);
}

/* ---- life ----------------------------------------------------------------- */

void kb_alter_partition_set_broker_epoch(kb_alter_partition *ap, int64_t epoch)
{
    if (ap == NULL)
        return;
    ap->broker_epoch = epoch;
    if (epoch >= 0)
        pump(ap);
}

int kb_alter_partition_pending(const kb_alter_partition *ap)
{
    return ap != NULL ? ap->n : 0;
}

kb_alter_partition *kb_alter_partition_new(kb_broker *b, kb_quorum *q, const kb_meta_image *img)
{
    kb_alter_partition *ap = calloc(1, sizeof(*ap));
    if (ap == NULL)
        return NULL;
    char client_id[64];
    snprintf(client_id, sizeof client_id, "runnel-broker-%d-alter-partition", b->node_id);
    ap->conn = kb_ctrl_conn_new(b->loop, b->work, client_id);
    if (ap->conn == NULL) {
        free(ap);
        return NULL;
    }
    ap->b = b;
    ap->q = q;
    ap->img = img;
    ap->target = -1;
    ap->broker_epoch = -1;
    ap->lag_ms = b->cfg->replica_lag_time_max_ms;
    kb_timer_init(&ap->scan, on_scan, ap);
    kb_timer_init(&ap->pump_timer, on_pump, ap);
    int64_t every = ap->lag_ms / 2 > SCAN_MIN_MS ? ap->lag_ms / 2 : SCAN_MIN_MS;
    (void)kb_timer_arm(b->loop, &ap->scan, every > INT32_MAX ? INT32_MAX : (int)every);
    return ap;
}

void kb_alter_partition_free(kb_alter_partition *ap)
{
    if (ap == NULL)
        return;
    kb_timer_disarm(ap->b->loop, &ap->scan);
    kb_timer_disarm(ap->b->loop, &ap->pump_timer);
    kb_ctrl_conn_free(ap->conn);
    while (ap->head != NULL) {
        ap_item *it = ap->head;
        ap->head = it->next;
        item_free(it);
    }
    free(ap);
}
