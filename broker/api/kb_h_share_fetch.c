/* Handlers for ShareFetch and ShareAcknowledge (KIP-932): the share session
 * (ShareSessionEpoch 0 opens, -1 closes, otherwise the session's next
 * epoch), acknowledgements applied to the share-partitions
 * (kb_share_partition), and records acquired for the member: whole batches
 * read from the log into the request's arena (at most
 * SHARE_READ_PART bytes a partition, SHARE_READ_MAX a request, one pread
 * each, as the console reads) with the acquired ranges beside them.
 *
 * Invariants: acknowledgements of a partition are all checked before any
 * is applied (one bad batch: the partition's AcknowledgeErrorCode, nothing
 * applied); only offsets inside the batches returned are acquired.
 *
 * A fetch that acquired nothing waits (parked on its session's partitions)
 * until an append reaches one of them or MaxWaitMs passes, then tries once
 * more; the group and session are looked up again then, by name.
 *
 * Not built: share.auto.offset.reset=by_duration (read as latest),
 * read_committed isolation. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kb_authz.h"
#include "kb_cluster_view.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_group_conf.h"
#include "kb_group_coord.h"
#include "kb_longpoll.h"
#include "kb_partition_log.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"
#include "kb_topics.h"
#include "kp_batch.h"

#define SHARE_READ_PART (1 << 20)
#define SHARE_READ_MAX  (8 << 20)
#define SHARE_MAX_RANGES 512 /* acquired ranges a partition answers at most */
#define FINAL_EPOCH     (-1)

/* One acknowledgement batch of either request. */
typedef struct ack_batch {
    int64_t first, last;
    const int8_t *types;
    int32_t ntypes;
} ack_batch;

/* What both requests share once decoded. */
typedef struct share_call {
    kb_req *req;
    kb_group *g;
    kb_share_session *session;
    kp_str member;
    kb_share_limits lim;
    bool renew_ok;
    int64_t now;
} share_call;

/* ---- the session and the group ------------------------------------------- */

/* The group and the session the request names (opening one at epoch 0). */
static kp_err share_session(share_call *c, kp_str group, int32_t epoch, bool can_open)
{
    kb_req *req = c->req;
    if (!kb_cv_share_groups_on(req))
        return KP_ERR_UNSUPPORTED_VERSION;
    if (group.len <= 0 || c->member.len <= 0)
        return KP_ERR_INVALID_REQUEST;
    if (!kb_authz(req, KB_OP_READ, KB_RES_GROUP, group))
        return KP_ERR_GROUP_AUTHORIZATION_FAILED;
    c->g = kb_groups_find(kb_group_coord_groups(req->broker), group);
    if (c->g == NULL || c->g->sg == NULL)
        return epoch == 0 ? KP_ERR_GROUP_ID_NOT_FOUND : KP_ERR_SHARE_SESSION_NOT_FOUND;
    kb_share_group *sg = c->g->sg;
    kb_group_coord_share_limits_for(req->broker, c->g, &c->lim);
    c->now = kb_group_coord_now(req->broker);
    if (sg->parts == NULL && (sg->parts = kb_share_parts_new()) == NULL)
        return KP_ERR__NOMEM;
    if (epoch == 0) {
        if (!can_open)
            return KP_ERR_INVALID_SHARE_SESSION_EPOCH;
        if (kb_share_group_member_find(sg, c->member) == NULL)
            return KP_ERR_UNKNOWN_MEMBER_ID;
        return kb_share_session_open(sg->parts, c->member, &c->session);
    }
    c->session = kb_share_session_find(sg->parts, c->member);
    if (c->session == NULL)
        return KP_ERR_SHARE_SESSION_NOT_FOUND;
    if (epoch != FINAL_EPOCH && epoch != c->session->epoch)
        return KP_ERR_INVALID_SHARE_SESSION_EPOCH;
    if (epoch != FINAL_EPOCH)
        c->session->epoch = epoch == INT32_MAX ? 1 : epoch + 1;
    return KP_ERR_NONE;
}

/* After a final-epoch request: what the member still holds goes back. */
static void share_close(share_call *c)
{
    kb_share_parts_release(c->g->sg->parts, kb_share_member_key(c->member), &c->lim, c->now);
    kb_share_session_close(c->g->sg->parts, c->session);
    c->session = NULL;
}

static kb_topic *live_topic(kb_req *req, const kp_uuid *id, int32_t part)
{
    kb_topic *t = kb_topics_find_id(req->broker->topics, id);
    if (t == NULL || t->state != KB_TOPIC_READY || part < 0 || part >= t->npartitions)
        return NULL;
    return t;
}

/* The share-partition of (topic, part), made at share.auto.offset.reset. */
static kp_err share_part(share_call *c, kb_topic *t, int32_t part, kb_share_part **out,
                         ks_log **log)
{
    kp_err e = kb_partition_log_get(c->req->broker, t, part, log);
    if (e != KP_ERR_NONE)
        return e;
    const char *reset = kb_group_conf_str(c->req->broker->gconf, kp_str_from(c->g->id),
                                          "share.auto.offset.reset", "latest");
    int64_t start = strcmp(reset, "earliest") == 0 ? ks_log_start_offset(*log)
                                                   : ks_log_high_watermark(*log);
    if (kb_share_parts_get(c->g->sg->parts, &t->id, part, start, out) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    return KP_ERR_NONE;
}

/* ---- acknowledgements ---------------------------------------------------- */

/* Kafka's checks of a partition's batches as a whole: in offset order, not
 * overlapping. */
static kp_err check_order(const ack_batch *b, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        if (b[i].first < 0 || b[i].first > b[i].last)
            return KP_ERR_INVALID_REQUEST;
        if (i > 0 && b[i].first <= b[i - 1].last)
            return KP_ERR_INVALID_REQUEST;
    }
    return KP_ERR_NONE;
}

/* Applies a partition's batches, all or none; the partition's error. */
static kp_err acknowledge(share_call *c, const kp_uuid *topic, int32_t part, const ack_batch *b,
                          int32_t n)
{
    if (n == 0)
        return KP_ERR_NONE;
    kb_topic *t = live_topic(c->req, topic, part);
    if (t == NULL)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    kp_err e = check_order(b, n);
    kb_share_part *sp = kb_share_parts_find(c->g->sg->parts, topic, part);
    if (e == KP_ERR_NONE && sp == NULL)
        e = KP_ERR_INVALID_RECORD_STATE;
    for (int32_t i = 0; e == KP_ERR_NONE && i < n; i++)
        e = kb_share_part_check_ack(sp, c->member, b[i].first, b[i].last, b[i].types, b[i].ntypes,
                                    c->renew_ok);
    for (int32_t i = 0; e == KP_ERR_NONE && i < n; i++)
        kb_share_part_ack(sp, b[i].first, b[i].last, b[i].types, b[i].ntypes, &c->lim, c->now);
    return e;
}

/* ---- acquiring records --------------------------------------------------- */

/* Reads whole batches from offset (below the high watermark) into the
 * arena; *last is the last offset they hold (-1: none). */
static kp_err read_batches(kb_req *req, ks_log *log, int64_t offset, int32_t max_bytes,
                           kp_records *rec, int64_t *last)
{
    ks_log_slice s;
    *last = -1;
    kp_err e = ks_log_read(log, offset, max_bytes, ks_log_high_watermark(log), &s, NULL);
    if (e != KP_ERR_NONE || s.range.len == 0)
        return e;
    size_t want = (size_t)s.range.len < (size_t)max_bytes ? (size_t)s.range.len : (size_t)max_bytes;
    uint8_t *buf = kp_arena_alloc(&req->arena, want);
    ssize_t got = buf != NULL ? pread(s.range.fd, buf, want, s.range.off) : -1;
    ks_log_slice_release(&s);
    if (got <= 0)
        return buf == NULL ? KP_ERR__NOMEM : KP_ERR__IO;
    size_t pos = 0;
    kp_batch_hdr h;
    while (pos + KP_BATCH_HDR_SIZE <= (size_t)got &&
           kp_batch_hdr_parse(buf + pos, (size_t)got - pos, &h) == KP_ERR_NONE &&
           pos + (size_t)kp_batch_total_size(&h) <= (size_t)got) {
        *last = kp_batch_last_offset(&h);
        pos += (size_t)kp_batch_total_size(&h);
    }
    *rec = (kp_records){buf, (int32_t)pos, NULL};
    return KP_ERR_NONE;
}

typedef kp_share_fetch_resp_partition_data part_out;

/* Acquires what the member may take of one partition; *budget bytes left
 * of the request, *records left of max_records. */
static void fetch_part(share_call *c, kb_share_part *sp, ks_log *log, int64_t *budget,
                       int32_t *records, part_out *out)
{
    int64_t from = kb_share_part_next_fetch(sp, &c->lim);
    if (from < 0 || from >= ks_log_high_watermark(log) || *budget <= 0 || *records <= 0)
        return;
    if (from < ks_log_start_offset(log))
        from = ks_log_start_offset(log);
    int32_t max = *budget < SHARE_READ_PART ? (int32_t)*budget : SHARE_READ_PART;
    int64_t last;
    kp_records rec;
    kp_err e = read_batches(c->req, log, from, max, &rec, &last);
    if (e != KP_ERR_NONE) {
        out->error_code = kp_err_to_wire(e);
        return;
    }
    if (last < from)
        return;
    kb_share_range *r = kp_arena_calloc(&c->req->arena, SHARE_MAX_RANGES, sizeof(*r));
    if (r == NULL || !KB_ARRAY_ALLOC(c->req, out->acquired_records, SHARE_MAX_RANGES)) {
        out->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
        return;
    }
    int32_t n = kb_share_part_acquire(sp, c->member, ks_log_start_offset(log), last, *records,
                                      &c->lim, c->now, r, SHARE_MAX_RANGES);
    for (int32_t i = 0; i < n; i++) {
        out->acquired_records.v[i] = (kp_share_fetch_resp_acquired_records){
            r[i].first, r[i].last, r[i].delivery_count};
        *records -= (int32_t)(r[i].last - r[i].first + 1);
    }
    out->acquired_records.n = n;
    if (n > 0) {
        out->records = rec;
        *budget -= rec.len;
    }
}

/* ---- ShareFetch ----------------------------------------------------------- */

typedef kp_share_fetch_resp_share_fetchable_topic_response topic_out;

static void part_defaults(kb_req *req, kb_topic *t, int32_t part, part_out *out)
{
    kp_share_fetch_resp_partition_data_defaults(out);
    out->partition_index = part;
    out->records = (kp_records){(const uint8_t *)"", 0, NULL};
    out->current_leader.leader_id = req->broker->cfg->node_id;
    out->current_leader.leader_epoch = t != NULL ? t->partitions[part].leader_epoch : -1;
}

/* The response slot of (topic, part), added on first use. */
static part_out *slot(kb_req *req, kp_share_fetch_resp *rs, const kp_uuid *topic, int32_t part,
                      int32_t max)
{
    for (int32_t i = 0; i < rs->responses.n; i++) {
        topic_out *to = &rs->responses.v[i];
        if (memcmp(&to->topic_id, topic, sizeof(*topic)) != 0)
            continue;
        for (int32_t j = 0; j < to->partitions.n; j++)
            if (to->partitions.v[j].partition_index == part)
                return &to->partitions.v[j];
        if (to->partitions.n >= max)
            return NULL;
        part_out *p = &to->partitions.v[to->partitions.n++];
        part_defaults(req, live_topic(req, topic, part), part, p);
        return p;
    }
    if (rs->responses.n >= max)
        return NULL;
    topic_out *to = &rs->responses.v[rs->responses.n++];
    to->topic_id = *topic;
    if (!KB_ARRAY_ALLOC(req, to->partitions, max))
        return NULL;
    to->partitions.n = 1;
    part_defaults(req, live_topic(req, topic, part), part, &to->partitions.v[0]);
    return &to->partitions.v[0];
}

static void fetch_acks(share_call *c, const kp_share_fetch_req *rq, kp_share_fetch_resp *rs,
                       int32_t max)
{
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_share_fetch_req_fetch_topic *ft = &rq->topics.v[i];
        for (int32_t j = 0; j < ft->partitions.n; j++) {
            const kp_share_fetch_req_fetch_partition *fp = &ft->partitions.v[j];
            int32_t n = fp->acknowledgement_batches.n > 0 ? fp->acknowledgement_batches.n : 0;
            ack_batch *b = kp_arena_calloc(&c->req->arena, (size_t)n + 1, sizeof(*b));
            part_out *out = slot(c->req, rs, &ft->topic_id, fp->partition_index, max);
            if (b == NULL || out == NULL)
                continue;
            for (int32_t k = 0; k < n; k++) {
                const kp_share_fetch_req_acknowledgement_batch *ab = &fp->acknowledgement_batches.v[k];
                b[k] = (ack_batch){ab->first_offset, ab->last_offset, ab->acknowledge_types.v,
                                   ab->acknowledge_types.n};
            }
            out->acknowledge_error_code = acknowledge(c, &ft->topic_id, fp->partition_index, b, n);
        }
    }
}

/* The session's partitions: the request's added, the forgotten removed. */
static kp_err update_session(share_call *c, const kp_share_fetch_req *rq, kp_share_fetch_resp *rs,
                             int32_t max)
{
    for (int32_t i = 0; i < rq->forgotten_topics_data.n; i++)
        for (int32_t j = 0; j < rq->forgotten_topics_data.v[i].partitions.n; j++)
            kb_share_session_forget(c->session, &rq->forgotten_topics_data.v[i].topic_id,
                                    rq->forgotten_topics_data.v[i].partitions.v[j]);
    for (int32_t i = 0; i < rq->topics.n; i++) {
        const kp_share_fetch_req_fetch_topic *ft = &rq->topics.v[i];
        for (int32_t j = 0; j < ft->partitions.n; j++) {
            int32_t p = ft->partitions.v[j].partition_index;
            kb_topic *t = live_topic(c->req, &ft->topic_id, p);
            kb_share_part *sp;
            ks_log *log;
            kp_err e = t == NULL ? KP_ERR_UNKNOWN_TOPIC_ID : share_part(c, t, p, &sp, &log);
            if (e == KP_ERR_NONE)
                e = kb_share_session_add(c->session, sp);
            if (e == KP_ERR__NOMEM)
                return e;
            part_out *out = slot(c->req, rs, &ft->topic_id, p, max);
            if (out != NULL && e != KP_ERR_NONE)
                out->error_code = kp_err_to_wire(e);
        }
    }
    return KP_ERR_NONE;
}

static void fetch_session(share_call *c, const kp_share_fetch_req *rq, kp_share_fetch_resp *rs,
                          int32_t max)
{
    int64_t budget = rq->max_bytes > 0 && rq->max_bytes < SHARE_READ_MAX ? rq->max_bytes
                                                                          : SHARE_READ_MAX;
    int32_t records = rq->max_records > 0 ? rq->max_records : 500;
    kb_share_session *s = c->session;
    for (int32_t i = 0; i < s->nparts; i++) {
        kb_share_part *sp = s->parts[i];
        kb_topic *t = live_topic(c->req, &sp->topic, sp->partition);
        ks_log *log;
        if (t == NULL || kb_partition_log_get(c->req->broker, t, sp->partition, &log) != KP_ERR_NONE)
            continue;
        part_out tmp;
        part_defaults(c->req, t, sp->partition, &tmp);
        fetch_part(c, sp, log, &budget, &records, &tmp);
        if (tmp.acquired_records.n <= 0 && tmp.error_code == KP_ERR_NONE)
            continue;
        part_out *out = slot(c->req, rs, &sp->topic, sp->partition, max);
        if (out == NULL)
            continue;
        out->error_code = tmp.error_code;
        out->records = tmp.records;
        out->acquired_records = tmp.acquired_records;
    }
}

/* ---- the long poll ---------------------------------------------------------- */

typedef struct share_park {
    kb_poll_waiter waiter;
    kb_timer timer;
    kb_req *req;
    int32_t max; /* response slots */
    bool parked;
} share_park;

static void park_end(share_park *p)
{
    if (!p->parked)
        return;
    p->parked = false;
    kb_timer_disarm(p->req->broker->loop, &p->timer);
    kb_longpoll_unpark(p->req->broker->longpoll, &p->waiter);
}

/* Tries once more with the group and session as they are now, and answers. */
static void park_finish(share_park *p)
{
    kb_req *req = p->req;
    const kp_share_fetch_req *rq = req->request;
    park_end(p);
    share_call c = {.req = req, .member = rq->member_id};
    c.g = kb_groups_find(kb_group_coord_groups(req->broker), rq->group_id);
    if (c.g != NULL && c.g->sg != NULL &&
        (c.session = kb_share_session_find(c.g->sg->parts, c.member)) != NULL) {
        kb_group_coord_share_limits_for(req->broker, c.g, &c.lim);
        c.now = kb_group_coord_now(req->broker);
        fetch_session(&c, rq, req->response, p->max);
        kb_group_coord_touch(req->broker, c.g);
    }
    req->on_cancel = NULL;
    req->release = free;
    req->release_arg = p;
    kb_req_finish(req);
}

static void on_park_timeout(kb_loop *loop, void *arg)
{
    (void)loop;
    park_finish(arg);
}

static void on_park_append(kb_poll_waiter *w)
{
    park_finish(w->arg);
}

static void on_park_cancel(kb_req *req)
{
    share_park *p = req->park_state;
    park_end(p);
    free(p);
}

/* Parks the request on the session's partitions; KB_PARKED, or the error. */
static kp_err park(share_call *c, int32_t wait_ms, int32_t max)
{
    kb_share_session *s = c->session;
    share_park *p = calloc(1, sizeof(*p));
    kb_topic **topics = calloc((size_t)s->nparts + 1, sizeof(*topics));
    int32_t *parts = calloc((size_t)s->nparts + 1, sizeof(*parts));
    int32_t k = 0;
    for (int32_t i = 0; topics != NULL && parts != NULL && i < s->nparts; i++) {
        kb_topic *t = live_topic(c->req, &s->parts[i]->topic, s->parts[i]->partition);
        if (t != NULL) {
            topics[k] = t;
            parts[k++] = s->parts[i]->partition;
        }
    }
    kp_err e = p != NULL && topics != NULL && parts != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
    if (e == KP_ERR_NONE) {
        p->req = c->req;
        p->max = max;
        p->waiter.wake = on_park_append;
        p->waiter.arg = p;
        e = kb_longpoll_park(c->req->broker->longpoll, &p->waiter, topics, parts, k);
    }
    free(topics);
    free(parts);
    if (e != KP_ERR_NONE) {
        free(p);
        return e;
    }
    p->parked = true;
    kb_timer_init(&p->timer, on_park_timeout, p);
    (void)kb_timer_arm(c->req->broker->loop, &p->timer, wait_ms);
    c->req->park_state = p;
    c->req->on_cancel = on_park_cancel;
    return KB_PARKED;
}

static int32_t fetch_slots(const kp_share_fetch_req *rq, const kb_share_session *s)
{
    int64_t n = s != NULL ? s->nparts : 0;
    for (int32_t i = 0; i < rq->topics.n; i++)
        n += rq->topics.v[i].partitions.n > 0 ? rq->topics.v[i].partitions.n : 0;
    return n > INT32_MAX / 2 ? INT32_MAX / 2 : (int32_t)n;
}

static bool has_acks(const kp_share_fetch_req *rq)
{
    for (int32_t i = 0; i < rq->topics.n; i++)
        for (int32_t j = 0; j < rq->topics.v[i].partitions.n; j++)
            if (rq->topics.v[i].partitions.v[j].acknowledgement_batches.n > 0)
                return true;
    return false;
}

kp_err kb_h_share_fetch(kb_req *req, const kp_share_fetch_req *rq, kp_share_fetch_resp *rs)
{
    share_call c = {.req = req, .member = rq->member_id, .renew_ok = rq->is_renew_ack};
    int32_t epoch = rq->share_session_epoch;
    kp_err e = (epoch == 0 && has_acks(rq)) ? KP_ERR_INVALID_REQUEST
                                            : share_session(&c, rq->group_id, epoch, true);
    if (e == KP_ERR__NOMEM)
        return e;
    rs->acquisition_lock_timeout_ms = c.g != NULL ? c.lim.lock_ms : 0;
    if (e != KP_ERR_NONE) {
        rs->error_code = e;
        return KP_ERR_NONE;
    }
    int32_t max = fetch_slots(rq, c.session);
    if (!KB_ARRAY_ALLOC(req, rs->responses, max))
        return KP_ERR__NOMEM;
    rs->responses.n = 0;
    fetch_acks(&c, rq, rs, max);
    if (epoch == FINAL_EPOCH) {
        share_close(&c);
    } else {
        if ((e = update_session(&c, rq, rs, max)) != KP_ERR_NONE)
            return e;
        if (!rq->is_renew_ack)
            fetch_session(&c, rq, rs, max);
    }
    kb_group_coord_touch(req->broker, c.g);
    if (epoch != FINAL_EPOCH && !rq->is_renew_ack && rs->responses.n == 0 && rq->max_wait_ms > 0 &&
        c.session->nparts > 0) {
        e = park(&c, rq->max_wait_ms < 30000 ? rq->max_wait_ms : 30000, max);
        return e == KP_ERR__NOMEM ? KP_ERR_NONE : e; /* no memory to wait: answer now */
    }
    return KP_ERR_NONE;
}

/* ---- ShareAcknowledge ----------------------------------------------------- */

kp_err kb_h_share_acknowledge(kb_req *req, const kp_share_acknowledge_req *rq,
                              kp_share_acknowledge_resp *rs)
{
    share_call c = {.req = req, .member = rq->member_id, .renew_ok = rq->is_renew_ack};
    kp_err e = share_session(&c, rq->group_id, rq->share_session_epoch, false);
    if (e == KP_ERR__NOMEM)
        return e;
    rs->acquisition_lock_timeout_ms = c.g != NULL ? c.lim.lock_ms : 0;
    if (e != KP_ERR_NONE) {
        rs->error_code = e;
        return KP_ERR_NONE;
    }
    int32_t nt = rq->topics.n > 0 ? rq->topics.n : 0;
    if (!KB_ARRAY_ALLOC(req, rs->responses, nt))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++) {
        const kp_share_acknowledge_req_acknowledge_topic *at = &rq->topics.v[i];
        kp_share_acknowledge_resp_share_acknowledge_topic_response *to = &rs->responses.v[i];
        int32_t np = at->partitions.n > 0 ? at->partitions.n : 0;
        to->topic_id = at->topic_id;
        if (!KB_ARRAY_ALLOC(req, to->partitions, np))
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < np; j++) {
            const kp_share_acknowledge_req_acknowledge_partition *ap = &at->partitions.v[j];
            int32_t n = ap->acknowledgement_batches.n > 0 ? ap->acknowledgement_batches.n : 0;
            ack_batch *b = kp_arena_calloc(&req->arena, (size_t)n + 1, sizeof(*b));
            if (b == NULL)
                return KP_ERR__NOMEM;
            for (int32_t k = 0; k < n; k++) {
                const kp_share_acknowledge_req_acknowledgement_batch *ab =
                    &ap->acknowledgement_batches.v[k];
                b[k] = (ack_batch){ab->first_offset, ab->last_offset, ab->acknowledge_types.v,
                                   ab->acknowledge_types.n};
            }
            kp_share_acknowledge_resp_partition_data *po = &to->partitions.v[j];
            kb_topic *t = live_topic(req, &at->topic_id, ap->partition_index);
            kp_share_acknowledge_resp_partition_data_defaults(po);
            po->partition_index = ap->partition_index;
            po->current_leader.leader_id = req->broker->cfg->node_id;
            po->current_leader.leader_epoch =
                t != NULL ? t->partitions[ap->partition_index].leader_epoch : -1;
            po->error_code = acknowledge(&c, &at->topic_id, ap->partition_index, b, n);
        }
    }
    if (rq->share_session_epoch == FINAL_EPOCH)
        share_close(&c);
    kb_group_coord_touch(req->broker, c.g);
    return KP_ERR_NONE;
}
