/* kb_observe: see kb_observe.h. */
#include "kb_observe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_config.h"
#include "kb_group_coord.h"
#include "kb_lag.h"
#include "kb_http_server.h"
#include "kb_log.h"
#include "kb_metrics.h"
#include "kb_partition_log.h"
#include "kb_req_metrics.h"
#include "kb_retention_guard.h"
#include "kb_server.h"
#include "kb_share_lag.h"
#include "kb_topics.h"
#include "ks_log.h"

/* Gauges rebuilt at every scrape. */
enum gauge {
    G_PARTITIONS,
    G_LEADERS,
    G_UNDER_REPLICATED,
    G_UNDER_MIN_ISR,
    G_OFFLINE,
    G_TOPIC_PARTITIONS,
    G_LOG_SIZE,
    G_LOG_START,
    G_LOG_END,
    G_CURRENT_OFFSET,
    G_OLDEST_OFFSET,
    G_CONNECTIONS,
    G_GROUP_OFFSET,
    G_GROUP_LAG,
    G_GROUP_MEMBERS,
    G_GROUP_LAG_SUM,
    G_GROUP_LAG_SECONDS,
    G_GROUP_PARTITION_STATUS,
    G_GROUP_STATUS,
    G_SHARE_START,
    G_SHARE_LAG,
    G_SHARE_MEMBERS,
    G_SHARE_LAG_SUM,
    G_GUARD_WARNINGS,
    G_GUARD_RECORDS_LOST,
    G_GUARD_HOLDS,
    G_COUNT,
};

static const char *const no_labels[] = {NULL};
static const char *const topic_l[] = {"topic"};
static const char *const part_l[] = {"topic", "partition"};
static const char *const listener_l[] = {"listener"};
static const char *const group_part_l[] = {"consumergroup", "topic", "partition"};
static const char *const group_l[] = {"consumergroup"};
static const char *const share_part_l[] = {"sharegroup", "topic", "partition"};
static const char *const share_l[] = {"sharegroup"};

static const struct gauge_def {
    const char *name, *help;
    size_t n_labels;
    const char *const *labels;
} gauge_defs[G_COUNT] = {
    [G_PARTITIONS] = {"kafka_server_replicamanager_partitioncount", "Partitions on this broker", 0,
                      no_labels},
    [G_LEADERS] = {"kafka_server_replicamanager_leadercount", "Partitions this broker leads", 0,
                   no_labels},
    [G_UNDER_REPLICATED] = {"kafka_server_replicamanager_underreplicatedpartitions",
                            "Partitions with fewer in-sync replicas than replicas", 0, no_labels},
    [G_UNDER_MIN_ISR] = {"kafka_server_replicamanager_underminisrpartitioncount",
                         "Partitions under min.insync.replicas", 0, no_labels},
    [G_OFFLINE] = {"kafka_server_replicamanager_offlinereplicacount",
                   "Partitions whose log is still being opened", 0, no_labels},
    [G_TOPIC_PARTITIONS] = {"kafka_topic_partitions", "Partitions of the topic", 1, topic_l},
    [G_LOG_SIZE] = {"kafka_log_log_size", "Bytes of the partition's log", 2, part_l},
    [G_LOG_START] = {"kafka_log_log_logstartoffset", "The partition's log start offset", 2,
                     part_l},
    [G_LOG_END] = {"kafka_log_log_logendoffset", "The partition's log end offset", 2, part_l},
    [G_CURRENT_OFFSET] = {"kafka_topic_partition_current_offset",
                          "The partition's high watermark", 2, part_l},
    [G_OLDEST_OFFSET] = {"kafka_topic_partition_oldest_offset",
                         "The partition's oldest offset (log start)", 2, part_l},
    [G_CONNECTIONS] = {"kafka_server_socket_server_metrics_connection_count",
                       "Open connections, by listener", 1, listener_l},
    [G_GROUP_OFFSET] = {"kafka_consumergroup_current_offset",
                        "The group's committed offset of the partition", 3, group_part_l},
    [G_GROUP_LAG] = {"kafka_consumergroup_lag",
                     "High watermark minus the group's committed offset", 3, group_part_l},
    [G_GROUP_MEMBERS] = {"kafka_consumergroup_members", "Members of the group", 1, group_l},
    [G_GROUP_LAG_SUM] = {"kafka_consumergroup_lag_sum", "The group's lag summed over its partitions",
                         1, group_l},
    [G_GROUP_LAG_SECONDS] = {"runnel_consumergroup_lag_seconds",
                             "Seconds since the group's next unread record was written", 3,
                             group_part_l},
    [G_GROUP_PARTITION_STATUS] = {"runnel_consumergroup_partition_status",
                                  "Lag verdict: 0 OK, 1 WARNING, 2 STALL, 3 STOPPED", 3,
                                  group_part_l},
    [G_GROUP_STATUS] = {"runnel_consumergroup_status",
                        "The group's lag verdict: 0 OK, 1 WARNING, 2 ERROR", 1, group_l},
    [G_SHARE_START] = {"kafka_sharegroup_start_offset", "The share-partition start offset", 3,
                       share_part_l},
    [G_SHARE_LAG] = {"kafka_sharegroup_lag",
                     "Records from the share-partition start offset to the high watermark not "
                     "yet acknowledged or archived",
                     3, share_part_l},
    [G_SHARE_MEMBERS] = {"kafka_sharegroup_members", "Members of the share group", 1, share_l},
    [G_SHARE_LAG_SUM] = {"kafka_sharegroup_lag_sum",
                         "The share group's lag summed over its share-partitions", 1, share_l},
    [G_GUARD_WARNINGS] = {"runnel_retention_guard_warnings_total",
                          "Times retention deleted records a group had not read", 0, no_labels},
    [G_GUARD_RECORDS_LOST] = {"runnel_retention_guard_records_lost_total",
                              "Unread records retention deleted, summed over groups", 0,
                              no_labels},
    [G_GUARD_HOLDS] = {"runnel_retention_guard_holds_total",
                       "Retention steps the guard held back (runnel.retention.guard=hold)", 0,
                       no_labels},
};

struct kb_observe {
    kb_broker *b;
    kb_http_server *http;
    kb_metric_family *g[G_COUNT];
    kb_metric_series *brokers;
};

static void set_gauge(kb_observe *o, enum gauge g, const char *const *values, double v)
{
    kb_metric_set(kb_metric_get(o->g[g], values), v);
}

static void partition_gauges(kb_observe *o, const kb_topic *t, const kb_partition *p,
                             int64_t *offline)
{
    if (p->log == NULL) {
        *offline += kb_partition_log_loading(t, p->index); /* else: opened on first use */
        return;
    }
    char idx[16];
    snprintf(idx, sizeof idx, "%d", (int)p->index);
    const char *v[] = {t->name, idx};
    set_gauge(o, G_LOG_SIZE, v, (double)ks_log_size(p->log));
    set_gauge(o, G_LOG_START, v, (double)ks_log_start_offset(p->log));
    set_gauge(o, G_LOG_END, v, (double)ks_log_end_offset(p->log));
    set_gauge(o, G_CURRENT_OFFSET, v, (double)ks_log_high_watermark(p->log));
    set_gauge(o, G_OLDEST_OFFSET, v, (double)ks_log_start_offset(p->log));
}

static void topic_gauges(kb_observe *o)
{
    const kb_topics *ts = o->b->topics;
    int64_t partitions = 0, offline = 0;
    for (size_t i = 0; i < kb_topics_count(ts); i++) {
        const kb_topic *t = kb_topics_at(ts, i);
        if (t->state != KB_TOPIC_READY) {
            continue;
        }
        const char *v[] = {t->name};
        set_gauge(o, G_TOPIC_PARTITIONS, v, t->npartitions);
        partitions += t->npartitions;
        for (int32_t p = 0; p < t->npartitions; p++) {
            partition_gauges(o, t, &t->partitions[p], &offline);
        }
    }
    set_gauge(o, G_PARTITIONS, no_labels, (double)partitions);
    set_gauge(o, G_LEADERS, no_labels, (double)partitions);
    set_gauge(o, G_UNDER_REPLICATED, no_labels, 0);
    set_gauge(o, G_UNDER_MIN_ISR, no_labels, 0);
    set_gauge(o, G_OFFLINE, no_labels, (double)offline);
}

static void connection_gauges(kb_observe *o)
{
    const kb_config *cfg = o->b->cfg;
    for (size_t i = 0; o->b->server != NULL && i < cfg->listeners.n; i++) {
        const char *v[] = {cfg->listeners.v[i].li_name};
        set_gauge(o, G_CONNECTIONS, v, (double)kb_server_conn_count(o->b->server, i));
    }
}

static void lag_row_gauges(void *arg, const kb_lag_row *row)
{
    kb_observe *o = arg;
    char idx[16];
    snprintf(idx, sizeof idx, "%d", (int)row->partition);
    const char *v[] = {row->group, row->topic, idx};
    set_gauge(o, G_GROUP_OFFSET, v, (double)row->committed);
    set_gauge(o, G_GROUP_PARTITION_STATUS, v, (double)row->status);
    if (row->lag >= 0) {
        set_gauge(o, G_GROUP_LAG, v, (double)row->lag);
    }
    if (row->lag_ms >= 0) {
        set_gauge(o, G_GROUP_LAG_SECONDS, v, (double)row->lag_ms / 1000.0);
    }
}

static void lag_group_gauges(void *arg, const kb_lag_group_row *row)
{
    kb_observe *o = arg;
    const char *v[] = {row->group};
    set_gauge(o, G_GROUP_MEMBERS, v, row->members);
    set_gauge(o, G_GROUP_LAG_SUM, v, (double)row->lag);
    set_gauge(o, G_GROUP_STATUS, v, (double)row->status);
}

static void share_row_gauges(void *arg, const kb_share_lag_row *row)
{
    kb_observe *o = arg;
    char idx[16];
    snprintf(idx, sizeof idx, "%d", (int)row->partition);
    const char *v[] = {row->group, row->topic, idx};
    set_gauge(o, G_SHARE_START, v, (double)row->start);
    if (row->lag >= 0) {
        set_gauge(o, G_SHARE_LAG, v, (double)row->lag);
    }
}

static void share_gauges(kb_observe *o)
{
    kb_groups *gs = kb_group_coord_groups(o->b);
    size_t cur = 0;
    for (kb_group *g; gs != NULL && (g = kb_groups_next(gs, &cur)) != NULL;) {
        if (g->sg == NULL) {
            continue;
        }
        kb_share_lag_group_row gr;
        kb_share_lag_group_of(o->b, g, &gr);
        const char *v[] = {g->id};
        set_gauge(o, G_SHARE_MEMBERS, v, gr.members);
        set_gauge(o, G_SHARE_LAG_SUM, v, (double)gr.lag);
        kb_share_lag_each_of(o->b, g, share_row_gauges, o);
    }
}

static void guard_gauges(kb_observe *o)
{
    const kb_retention_guard *g = kb_partition_log_guard(o->b);
    kb_retention_guard_stats st = {0};
    if (g != NULL) {
        kb_retention_guard_stats_get(g, &st);
    }
    set_gauge(o, G_GUARD_WARNINGS, no_labels, (double)st.warnings);
    set_gauge(o, G_GUARD_RECORDS_LOST, no_labels, (double)st.records_lost);
    set_gauge(o, G_GUARD_HOLDS, no_labels, (double)st.holds);
}

static void refresh(kb_observe *o)
{
    for (int i = 0; i < G_COUNT; i++) {
        kb_metric_family_clear(o->g[i]);
    }
    topic_gauges(o);
    connection_gauges(o);
    guard_gauges(o);
    if (o->b->group_coord != NULL) {
        kb_lag_each(o->b, lag_row_gauges, o);
        kb_lag_each_group(o->b, lag_group_gauges, o);
        share_gauges(o);
    }
}

static bool to_response(void *arg, const char *data, size_t len)
{
    return kb_http_resp_append(arg, data, len);
}

static void on_http(const kb_http_request *req, kb_http_response *resp, void *arg)
{
    kb_observe *o = arg;
    if (req->method != KB_HTTP_GET && req->method != KB_HTTP_HEAD) {
        kb_http_resp_status(resp, 405);
        kb_http_resp_header(resp, "Allow", "GET, HEAD");
        return;
    }
    if (strcmp(req->path, "/") == 0) {
        kb_http_resp_printf(resp, "Runnel metrics: /metrics\n");
        return;
    }
    if (strcmp(req->path, "/metrics") != 0) {
        kb_http_resp_status(resp, 404);
        kb_http_resp_printf(resp, "404 Not Found\n");
        return;
    }
    refresh(o);
    kb_http_resp_content_type(resp, "text/plain; version=0.0.4; charset=utf-8");
    kb_prom_out out = {to_response, resp, true};
    kb_metrics_write(o->b->metrics, &out);
}

static void make_gauges(kb_observe *o, kb_metrics *m)
{
    for (int i = 0; i < G_COUNT; i++) {
        const struct gauge_def *d = &gauge_defs[i];
        o->g[i] = kb_metrics_family(m, d->name, d->help, KB_METRIC_GAUGE, d->n_labels, d->labels,
                                    NULL, 0);
    }
    o->brokers = kb_metric_get(
        kb_metrics_family(m, "kafka_brokers", "Brokers in the cluster", KB_METRIC_GAUGE, 0,
                          no_labels, NULL, 0),
        no_labels);
    kb_metric_set(o->brokers, 1);
}

kp_err kb_observe_start(kb_broker *b, char *err, size_t errlen)
{
    if (b->cfg->metrics_listener == NULL || b->cfg->metrics_listener[0] == '\0') {
        return KP_ERR_NONE;
    }
    b->metrics = kb_metrics_new((size_t)b->cfg->metrics_max_series);
    b->observe = calloc(1, sizeof *b->observe);
    if (b->metrics == NULL || b->observe == NULL ||
        (b->req_metrics = kb_req_metrics_new(b->metrics)) == NULL) {
        snprintf(err, errlen, "out of memory starting the metrics listener");
        kb_observe_stop(b);
        return KP_ERR__NOMEM;
    }
    kb_observe *o = b->observe;
    o->b = b;
    make_gauges(o, b->metrics);
    kb_http_server_opts opts = {.url = b->cfg->metrics_listener, .handler = on_http, .arg = o};
    kp_err e = kb_http_server_start(b->loop, &opts, &o->http, err, errlen);
    if (e != KP_ERR_NONE) {
        kb_observe_stop(b);
        return e;
    }
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"metrics listener started\" url=%s port=%u",
           b->cfg->metrics_listener, (unsigned)kb_http_server_port(o->http));
    return KP_ERR_NONE;
}

void kb_observe_stop(kb_broker *b)
{
    if (b->observe != NULL) {
        kb_http_server_stop(b->observe->http);
        free(b->observe);
        b->observe = NULL;
    }
    kb_req_metrics_free(b->req_metrics);
    b->req_metrics = NULL;
    kb_metrics_free(b->metrics);
    b->metrics = NULL;
}

uint16_t kb_observe_port(const kb_broker *b)
{
    return b->observe != NULL && b->observe->http != NULL ? kb_http_server_port(b->observe->http)
                                                          : 0;
}
