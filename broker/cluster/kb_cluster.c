#include "kb_cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_alter_partition.h"
#include "kb_cluster_act.h"
#include "kb_ctrl_conn.h"
#include "kb_log.h"
#include "kb_meta_fetch.h"
#include "kb_meta_image.h"
#include "kb_meta_props.h"
#include "kb_quorum.h"
#include "kb_server.h"
#include "kb_uuid.h"
#include "kp_msg.h"

#define REGISTRATION_VERSION 4
#define HEARTBEAT_VERSION 1
#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 5000
#define MAX_DIRS 64
#define FENCED_HEARTBEAT_MS 100
/* Controlled shutdown, as Kafka's BrokerLifecycleManager and BrokerServer:
 * the first heartbeat the controller answers "not yet" is followed by the
 * next one this soon, and the whole wait is bounded by Kafka's shutdown
 * deadline (5 minutes). */
#define SHUTDOWN_FIRST_RETRY_MS 50
#define SHUTDOWN_TIMEOUT_MS 300000

/* The feature ranges Runnel registers with: Kafka 4.4's levels, so a
 * controller formatted at 4.4's defaults accepts it. The records of these
 * levels are read and counted today; the metadata image that acts on them
 * is the next step (docs/cluster.md). */
static const struct {
    const char *name;
    int16_t min, max;
} features[] = {
    {"metadata.version", 7, 33}, /* 3.3-IV3 .. 4.4-IV2 */
    {"kraft.version", 0, 1},
    {"transaction.version", 0, 2},
    {"group.version", 0, 1},
    {"eligible.leader.replicas.version", 0, 1},
    {"share.version", 0, 2},
    {"streams.version", 0, 1},
};
#define N_FEATURES (sizeof(features) / sizeof(features[0]))

struct kb_cluster {
    kb_broker *b;
    const kb_config *cfg;
    kb_quorum q;
    kb_meta_fetch *mf;
    kb_ctrl_conn *conn;
    kb_forward *fwd; /* admin requests to the active controller */
    kb_ib *ib;       /* other brokers and producer id blocks (kb_interbroker.h) */
    kb_alter_partition *alter; /* ISR changes this broker asks for as a leader */
    int target; /* index of the node conn talks to (kb_quorum), -1: none */
    int answered_by; /* the node that answered the last heartbeat */
    kb_meta_props ids;
    kp_uuid dir_ids[MAX_DIRS];
    size_t ndirs;
    kp_uuid incarnation;
    int64_t broker_epoch; /* -1: not registered */
    int64_t prev_epoch;
    bool fenced;
    bool in_flight;
    int64_t sent_at_ms;
    int backoff_ms;
    int attempts;
    bool failed;
    bool refusing; /* asking the controllers' cluster id before stopping */
    bool shutting_down;      /* SIGTERM: heartbeats ask to shut down (WantShutDown) */
    bool sent_want_shutdown; /* the heartbeat in flight asked it */
    bool shutdown_answered;  /* the controller answered one such heartbeat */
    int64_t shutdown_began_ms;
    kb_timer timer;
    kb_timer shutdown_timer; /* the deadline of the controlled shutdown */
    kb_meta_image image;
    kb_cluster_act *act;
    kb_meta_record_fn *apply;
    void *apply_arg;
    int64_t control_records;
};

static int64_t cluster_broker_epoch(void *arg)
{
    return ((kb_cluster *)arg)->broker_epoch;
}

kb_ib *kb_cluster_interbroker(kb_cluster *c)
{
    return c != NULL ? c->ib : NULL;
}

bool kb_cluster_enabled(const kb_config *cfg)
{
    return kb_config_cluster_mode(cfg);
}

kp_err kb_cluster_check(const kb_config *cfg, char *err, size_t errlen)
{
    kb_quorum q;
    kp_err e = kb_quorum_parse(cfg, &q, err, errlen);
    kb_quorum_fini(&q);
    if (e != KP_ERR_NONE)
        return e;
    kb_meta_props ids;
    kp_uuid dirs[MAX_DIRS];
    return kb_meta_props_check_all(cfg, &ids, dirs, MAX_DIRS, err, errlen);
}

static void count_record(void *arg, const kb_meta_record *rec)
{
    kb_cluster *c = arg;
    if (rec->control)
        c->control_records++;
    KB_LOG(KB_LL_DEBUG, KB_SUB_MAIN, "msg=\"metadata record\" offset=%lld control=%d type=%d "
           "version=%d", (long long)rec->offset, rec->control, rec->type, rec->version);
}

static void fatal(kb_cluster *c);

static const char *record_name(const kb_meta_record *rec)
{
    return rec->control ? kb_ctrl_name(rec->type) : kb_mrec_name(rec->type);
}

/* Every record goes through the image; one it cannot apply stops the
 * broker (invariant 6): serving from an image that skipped a record would
 * answer with a cluster that does not exist. */
static void on_record(void *arg, const kb_meta_record *rec)
{
    kb_cluster *c = arg;
    if (c->failed)
        return;
    kp_err e = kb_meta_image_apply(&c->image, rec);
    if (e != KP_ERR_NONE) {
        bool unknown = e == KP_ERR__INVAL;
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"stopping: %s metadata record\" record=%s "
               "control=%d type=%d version=%d offset=%lld error=%s", unknown
               ? "cannot apply a newer or unknown" : "cannot apply a malformed or inconsistent",
               record_name(rec), rec->control, rec->type, rec->version, (long long)rec->offset,
               kp_err_name(e));
        fatal(c);
        return;
    }
    c->apply(c->apply_arg, rec);
}

const kb_meta_image *kb_cluster_image(const kb_cluster *c)
{
    return c != NULL ? &c->image : NULL;
}

void kb_cluster_set_apply(kb_cluster *c, kb_meta_record_fn *fn, void *arg)
{
    c->apply = fn != NULL ? fn : count_record;
    c->apply_arg = fn != NULL ? arg : c;
}

kb_forward *kb_cluster_forwarder(kb_cluster *c)
{
    return c != NULL ? c->fwd : NULL;
}

bool kb_cluster_failed(const kb_cluster *c)
{
    return c != NULL && c->failed;
}

static void fatal(kb_cluster *c)
{
    c->failed = true;
    kb_loop_stop(c->b->loop);
}

/* ---- the controllers' cluster id, for the one line a mismatch gets ---- */

static void encode_describe(kp_writer *w, const void *msg, int16_t v)
{
    kp_describe_cluster_req_encode(w, msg, v);
}

static void on_describe(void *arg, kp_reader *body)
{
    kb_cluster *c = arg;
    char theirs[64] = "unknown";
    kp_arena a;
    kp_arena_init(&a);
    kp_describe_cluster_resp rs;
    if (body != NULL && kp_describe_cluster_resp_decode(body, &a, &rs, 1) == KP_ERR_NONE &&
        rs.cluster_id.len > 0)
        snprintf(theirs, sizeof(theirs), "%.*s", (int)(rs.cluster_id.len < 63 ? rs.cluster_id.len : 63),
                 rs.cluster_id.p);
    kp_arena_fini(&a);
    KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"refusing to start: meta.properties has cluster.id=%s "
           "but the controllers' cluster id is %s (INCONSISTENT_CLUSTER_ID)\"",
           c->ids.cluster_id, theirs);
    fatal(c);
}

static void inconsistent_cluster(void *arg, kp_err err, const char *addr)
{
    kb_cluster *c = arg;
    (void)err;
    (void)addr;
    if (c->failed || c->refusing)
        return;
    c->refusing = true;
    kp_describe_cluster_req rq = {.endpoint_type = 2}; /* 2: controllers */
    if (!kb_ctrl_conn_is_open(c->conn) ||
        kb_ctrl_conn_send(c->conn, KP_API_DESCRIBE_CLUSTER, 1, encode_describe, &rq, on_describe,
                          c) != KP_ERR_NONE)
        on_describe(c, NULL);
    c->in_flight = true; /* no more heartbeats */
}

/* ---- registration and heartbeats ------------------------------------- */

static void arm(kb_cluster *c, int ms)
{
    kb_timer_arm(c->b->loop, &c->timer, ms);
}

static void retry_later(kb_cluster *c, const char *why)
{
    char addr[300];
    c->attempts++;
    KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"%s; retrying\" controller=%s attempt=%d retry_ms=%d",
           why, kb_quorum_addr(&c->q, c->target, addr, sizeof addr), c->attempts,
           c->backoff_ms);
    kb_quorum_forget_leader(&c->q);
    kb_ctrl_conn_close(c->conn);
    c->target = -1;
    arm(c, c->backoff_ms);
    c->backoff_ms = c->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : c->backoff_ms * 2;
}

static bool ensure_conn(kb_cluster *c)
{
    int want = kb_quorum_pick(&c->q);
    if (kb_ctrl_conn_is_open(c->conn) && want == c->target)
        return true;
    c->target = want;
    return kb_ctrl_conn_open(c->conn, c->q.v[want].host, c->q.v[want].port) == KP_ERR_NONE;
}

static void fill_listeners(kb_cluster *c, kp_broker_registration_req *rq,
                           kp_broker_registration_req_listener *ls, size_t max)
{
    const kb_listener_list *adv = &c->cfg->advertised_listeners;
    size_t n = 0;
    for (size_t i = 0; i < adv->n && n < max; i++) {
        const kb_listener *l = &adv->v[i];
        if (l->li_controller)
            continue;
        ls[n].name = kp_str_from(l->li_name);
        ls[n].host = kp_str_from(l->li_host);
        ls[n].port = l->li_port ? l->li_port : kb_server_port(c->b->server, i);
        ls[n].security_protocol = (int16_t)l->li_protocol;
        n++;
    }
    rq->listeners.n = (int32_t)n;
    rq->listeners.v = ls;
}

static void encode_registration(kp_writer *w, const void *msg, int16_t v)
{
    kp_broker_registration_req_encode(w, msg, v);
}

static void encode_heartbeat(kp_writer *w, const void *msg, int16_t v)
{
    kp_broker_heartbeat_req_encode(w, msg, v);
}

static void on_registration(void *arg, kp_reader *body);
static void on_heartbeat(void *arg, kp_reader *body);

static void send_registration(kb_cluster *c)
{
    kp_broker_registration_req_listener ls[16];
    kp_broker_registration_req_feature fs[N_FEATURES];
    for (size_t i = 0; i < N_FEATURES; i++)
        fs[i] = (kp_broker_registration_req_feature){kp_str_from(features[i].name),
                                                     features[i].min, features[i].max};
    kp_broker_registration_req rq;
    kp_broker_registration_req_defaults(&rq);
    rq.broker_id = c->cfg->node_id;
    rq.cluster_id = kp_str_from(c->ids.cluster_id);
    rq.incarnation_id = c->incarnation;
    fill_listeners(c, &rq, ls, 16);
    rq.features.n = (int32_t)N_FEATURES;
    rq.features.v = fs;
    rq.rack = c->cfg->broker_rack ? kp_str_from(c->cfg->broker_rack) : KP_STR_NULL;
    rq.log_dirs.n = (int32_t)c->ndirs;
    rq.log_dirs.v = c->dir_ids;
    rq.previous_broker_epoch = c->prev_epoch;
    if (kb_ctrl_conn_send(c->conn, KP_API_BROKER_REGISTRATION, REGISTRATION_VERSION,
                          encode_registration, &rq, on_registration, c) == KP_ERR_NONE)
        c->in_flight = true;
}

static void send_heartbeat(kb_cluster *c)
{
    kp_broker_heartbeat_req rq;
    kp_broker_heartbeat_req_defaults(&rq);
    rq.broker_id = c->cfg->node_id;
    rq.broker_epoch = c->broker_epoch;
    rq.current_metadata_offset = kb_meta_fetch_next_offset(c->mf) - 1;
    rq.want_fence = !kb_meta_fetch_caught_up(c->mf);
    rq.want_shut_down = c->shutting_down;
    if (kb_ctrl_conn_send(c->conn, KP_API_BROKER_HEARTBEAT, HEARTBEAT_VERSION, encode_heartbeat,
                          &rq, on_heartbeat, c) == KP_ERR_NONE) {
        c->in_flight = true;
        c->sent_want_shutdown = rq.want_shut_down;
    }
}

static void on_tick(kb_loop *loop, void *arg)
{
    kb_cluster *c = arg;
    if (c->in_flight) {
        if (kb_loop_now_ms(loop) - c->sent_at_ms > c->cfg->broker_session_timeout_ms)
            kb_ctrl_conn_close(c->conn); /* its callback reports the loss */
        arm(c, c->cfg->broker_heartbeat_interval_ms);
        return;
    }
    if (!ensure_conn(c)) {
        retry_later(c, "cannot connect to the controller");
        return;
    }
    c->sent_at_ms = kb_loop_now_ms(loop);
    if (c->broker_epoch < 0)
        send_registration(c);
    else
        send_heartbeat(c);
    if (!c->in_flight)
        retry_later(c, "cannot send to the controller");
}

static void registered(kb_cluster *c, int64_t epoch)
{
    c->broker_epoch = epoch;
    c->prev_epoch = epoch;
    kb_alter_partition_set_broker_epoch(c->alter, epoch);
    c->answered_by = c->target;
    c->backoff_ms = BACKOFF_MIN_MS;
    c->attempts = 0;
    char addr[300];
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"registered with the controller\" broker_epoch=%lld "
           "controller=%s", (long long)epoch,
           kb_quorum_addr(&c->q, c->target, addr, sizeof addr));
    arm(c, 0); /* the first heartbeat at once */
}

/* The controller's answer: the decoded response's error, KP_ERR__IO when
 * there was none (no connection), or the decoder's error. */
static kp_err answer_of(kp_reader *body, int key, int16_t version, void *rs,
                        const int16_t *error_code)
{
    if (body == NULL)
        return KP_ERR__IO;
    kp_arena a;
    kp_arena_init(&a);
    kp_err e = kp_api_lookup(key)->response.decode(body, &a, rs, version);
    kp_arena_fini(&a); /* the fields read afterwards are plain values */
    return e != KP_ERR_NONE ? e : (kp_err)*error_code;
}

static void retry_after_error(kb_cluster *c, const char *what, kp_err e)
{
    char why[96];
    snprintf(why, sizeof why, "%s failed (%s)", what,
             e == KP_ERR__IO ? "controller unreachable" : kp_err_name(e));
    retry_later(c, why);
}

static void on_registration(void *arg, kp_reader *body)
{
    kb_cluster *c = arg;
    c->in_flight = false;
    if (c->failed)
        return;
    kp_broker_registration_resp rs;
    kp_err e = answer_of(body, KP_API_BROKER_REGISTRATION, REGISTRATION_VERSION, &rs,
                         &rs.error_code);
    if (e == KP_ERR_NONE) {
        registered(c, rs.broker_epoch);
    } else if (e == KP_ERR_INCONSISTENT_CLUSTER_ID) {
        inconsistent_cluster(c, e, NULL);
    } else if (e == KP_ERR_UNSUPPORTED_VERSION) {
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"the controller refused the registration: the "
               "cluster's finalized features are outside the ranges Runnel supports "
               "(UNSUPPORTED_VERSION)\"");
        fatal(c);
    } else {
        retry_after_error(c, "broker registration", e);
    }
}

/* ---- controlled shutdown ------------------------------------------------- */

/* The partitions the image has this broker lead. */
static int count_leaderships(const kb_cluster *c)
{
    int n = 0;
    for (int i = 0; i < c->image.topics.n; i++) {
        const kb_mi_topic *t = c->image.topics.v[i];
        for (int32_t p = 0; p < t->n_parts; p++)
            n += t->parts[p].present && t->parts[p].leader == c->cfg->node_id;
    }
    return n;
}

static void shutdown_done(kb_cluster *c, const char *msg, kb_log_level level)
{
    kb_timer_disarm(c->b->loop, &c->shutdown_timer);
    KB_LOG(level, KB_SUB_MAIN, "msg=\"%s\" waited_ms=%lld leaderships=%d broker_epoch=%lld "
           "metadata_offset=%lld", msg,
           (long long)(kb_loop_now_ms(c->b->loop) - c->shutdown_began_ms), count_leaderships(c),
           (long long)c->broker_epoch, (long long)kb_meta_fetch_next_offset(c->mf) - 1);
    kb_loop_stop(c->b->loop);
}

static void on_shutdown_deadline(kb_loop *loop, void *arg)
{
    (void)loop;
    shutdown_done(arg, "timed out waiting for the controller to approve the controlled shutdown",
                  KB_LL_ERROR);
}

bool kb_cluster_begin_shutdown(kb_cluster *c)
{
    if (c == NULL || c->shutting_down || c->failed || !c->cfg->controlled_shutdown_enable)
        return false;
    if (c->broker_epoch < 0 || c->fenced) {
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"skipping the controlled shutdown: not serving in "
               "the cluster\" broker_epoch=%lld fenced=%d", (long long)c->broker_epoch, c->fenced);
        return false;
    }
    c->shutting_down = true;
    c->shutdown_began_ms = kb_loop_now_ms(c->b->loop);
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"beginning the controlled shutdown: asking the "
           "controller to move this broker's leaderships\" leaderships=%d broker_epoch=%lld "
           "timeout_ms=%d", count_leaderships(c), (long long)c->broker_epoch, SHUTDOWN_TIMEOUT_MS);
    (void)kb_timer_arm(c->b->loop, &c->shutdown_timer, SHUTDOWN_TIMEOUT_MS);
    if (!c->in_flight)
        arm(c, 0); /* the next heartbeat at once; one in flight is followed at once */
    return true;
}

/* A heartbeat answered while shutting down: stop once the controller says
 * so; after the first "not yet" ask again soon, then at the interval. */
static bool shutdown_answered(kb_cluster *c, const kp_broker_heartbeat_resp *rs)
{
    if (!c->shutting_down)
        return false;
    if (!c->sent_want_shutdown) {
        arm(c, 0);
        return true;
    }
    if (rs->should_shut_down) {
        shutdown_done(c, "the controller approved the controlled shutdown", KB_LL_INFO);
        return true;
    }
    arm(c, c->shutdown_answered ? c->cfg->broker_heartbeat_interval_ms : SHUTDOWN_FIRST_RETRY_MS);
    c->shutdown_answered = true;
    return true;
}

static void heartbeat_answered(kb_cluster *c, const kp_broker_heartbeat_resp *rs)
{
    if (rs->is_fenced != c->fenced)
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"%s\" broker_epoch=%lld metadata_offset=%lld",
               rs->is_fenced ? "fenced by the controller" : "unfenced: serving in the cluster",
               (long long)c->broker_epoch, (long long)kb_meta_fetch_next_offset(c->mf) - 1);
    if (c->attempts > 0 || c->target != c->answered_by) {
        char addr[300];
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"heartbeats answered\" controller=%s "
               "failed_attempts=%d", kb_quorum_addr(&c->q, c->target, addr, sizeof addr),
               c->attempts);
    }
    c->answered_by = c->target;
    c->fenced = rs->is_fenced;
    c->backoff_ms = BACKOFF_MIN_MS;
    c->attempts = 0;
    if (shutdown_answered(c, rs))
        return;
    /* Fenced while catching up with the registration record: ask again soon,
     * as Kafka's broker does while starting. */
    int next = c->cfg->broker_heartbeat_interval_ms;
    arm(c, c->fenced && next > FENCED_HEARTBEAT_MS ? FENCED_HEARTBEAT_MS : next);
}

static void on_heartbeat(void *arg, kp_reader *body)
{
    kb_cluster *c = arg;
    c->in_flight = false;
    if (c->failed)
        return;
    kp_broker_heartbeat_resp rs;
    kp_err e = answer_of(body, KP_API_BROKER_HEARTBEAT, HEARTBEAT_VERSION, &rs, &rs.error_code);
    if (e == KP_ERR_NONE) {
        heartbeat_answered(c, &rs);
    } else if (c->shutting_down &&
               (e == KP_ERR_STALE_BROKER_EPOCH || e == KP_ERR_BROKER_ID_NOT_REGISTERED)) {
        shutdown_done(c, "the controller ended the session during the controlled shutdown",
                      KB_LL_WARN); /* fenced: it leads nothing any more */
    } else if (e == KP_ERR_STALE_BROKER_EPOCH || e == KP_ERR_BROKER_ID_NOT_REGISTERED) {
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"session lost; registering again\" error=%s",
               kp_err_name(e));
        c->broker_epoch = -1;
        kb_alter_partition_set_broker_epoch(c->alter, -1);
        c->fenced = true;
        arm(c, 0);
    } else {
        c->backoff_ms = BACKOFF_MIN_MS; /* a failover: find the new controller at once */
        retry_after_error(c, "heartbeat", e);
    }
}

/* ---- start and stop ----------------------------------------------------- */

static kp_err start_fetch(kb_cluster *c, char *err, size_t errlen)
{
    kb_meta_fetch_opts o = {
        .node_id = c->cfg->node_id,
        .cluster_id = c->ids.cluster_id,
        .directory_id = c->dir_ids[c->ndirs - 1], /* metadata.log.dir's, or the first dir's */
        .work = c->b->work,
        .max_wait_ms = 500,
        .on_record = on_record,
        .arg = c,
        .on_fatal = inconsistent_cluster,
    };
    c->mf = kb_meta_fetch_new(c->b->loop, &c->q, &o);
    if (c->mf == NULL) {
        snprintf(err, errlen, "out of memory starting the metadata fetcher");
        return KP_ERR__NOMEM;
    }
    kb_meta_fetch_start(c->mf);
    return KP_ERR_NONE;
}

kp_err kb_cluster_start(kb_broker *b, kb_cluster **out, char *err, size_t errlen)
{
    kb_cluster *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return KP_ERR__NOMEM;
    *out = c;
    c->b = b;
    c->cfg = b->cfg;
    c->target = -1;
    c->answered_by = -1;
    c->broker_epoch = -1;
    c->prev_epoch = -1;
    c->fenced = true;
    c->backoff_ms = BACKOFF_MIN_MS;
    kb_meta_image_init(&c->image);
    c->act = kb_cluster_act_new(b, &c->image, b->cfg->node_id);
    if (c->act == NULL)
        return KP_ERR__NOMEM;
    kb_cluster_set_apply(c, NULL, NULL);
    kb_timer_init(&c->timer, on_tick, c);
    kb_timer_init(&c->shutdown_timer, on_shutdown_deadline, c);
    kb_uuid_random(&c->incarnation);
    kp_err e = kb_quorum_parse(c->cfg, &c->q, err, errlen);
    if (e == KP_ERR_NONE)
        e = kb_meta_props_check_all(c->cfg, &c->ids, c->dir_ids, MAX_DIRS, err, errlen);
    if (e != KP_ERR_NONE)
        return e;
    const char *dirs[MAX_DIRS];
    c->ndirs = kb_meta_props_dirs(c->cfg, dirs, MAX_DIRS);
    char client_id[64];
    snprintf(client_id, sizeof(client_id), "runnel-broker-%d", c->cfg->node_id);
    c->conn = kb_ctrl_conn_new(b->loop, b->work, client_id);
    c->fwd = kb_forward_new(b->loop, b->work, &c->q, c->cfg->node_id);
    c->ib = kb_ib_new(b, &c->q, &c->image, cluster_broker_epoch, c);
    c->alter = kb_alter_partition_new(b, &c->q, &c->image);
    if (c->conn == NULL || c->fwd == NULL || c->ib == NULL || c->alter == NULL)
        return KP_ERR__NOMEM;
    kb_cluster_act_set_isr(c->act, kb_alter_partition_check, c->alter);
    if ((e = start_fetch(c, err, errlen)) != KP_ERR_NONE)
        return e;
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"joining the cluster\" cluster_id=%s node_id=%d "
           "controllers=%zu", c->ids.cluster_id, c->cfg->node_id, c->q.n);
    arm(c, 0);
    return KP_ERR_NONE;
}

void kb_cluster_stop(kb_cluster *c)
{
    if (c == NULL)
        return;
    kb_timer_disarm(c->b->loop, &c->timer);
    kb_timer_disarm(c->b->loop, &c->shutdown_timer);
    kb_meta_fetch_free(c->mf);
    kb_forward_free(c->fwd);
    kb_ib_free(c->ib);
    kb_alter_partition_free(c->alter);
    kb_ctrl_conn_free(c->conn);
    kb_quorum_fini(&c->q);
    kb_cluster_act_free(c->act);
    kb_meta_image_fini(&c->image);
    free(c);
}
