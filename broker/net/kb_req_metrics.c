/* kb_req_metrics: see kb_req_metrics.h. */
#include "kb_req_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "kb_conn.h"
#include "kb_context.h"
#include "kb_map.h"
#include "kb_topics.h"
#include "kp_batch.h"

#define API_SLOTS 128

enum topic_counter {
    TC_MESSAGES_IN,
    TC_BYTES_IN,
    TC_BYTES_OUT,
    TC_BYTES_REJECTED,
    TC_FAILED_PRODUCE,
    TC_FAILED_FETCH,
    TC_TOTAL_PRODUCE,
    TC_TOTAL_FETCH,
    TC_COUNT,
};

static const char *const topic_counter_names[TC_COUNT] = {
    "kafka_server_brokertopicmetrics_messagesin_total",
    "kafka_server_brokertopicmetrics_bytesin_total",
    "kafka_server_brokertopicmetrics_bytesout_total",
    "kafka_server_brokertopicmetrics_bytesrejected_total",
    "kafka_server_brokertopicmetrics_failedproducerequests_total",
    "kafka_server_brokertopicmetrics_failedfetchrequests_total",
    "kafka_server_brokertopicmetrics_totalproducerequests_total",
    "kafka_server_brokertopicmetrics_totalfetchrequests_total",
};

static const char *const topic_counter_help[TC_COUNT] = {
    "Records appended by Produce",
    "Record bytes appended by Produce",
    "Record bytes answered by Fetch",
    "Record bytes of Produce partitions refused",
    "Produce requests with a failed partition",
    "Fetch requests with a failed partition",
    "Produce requests",
    "Fetch requests",
};

enum latency {
    LAT_TOTAL,
    LAT_QUEUE,
    LAT_LOCAL,
    LAT_REMOTE,
    LAT_SEND,
    LAT_COUNT,
};

static const char *const latency_names[LAT_COUNT] = {
    "kafka_network_requestmetrics_totaltimems",
    "kafka_network_requestmetrics_requestqueuetimems",
    "kafka_network_requestmetrics_localtimems",
    "kafka_network_requestmetrics_remotetimems",
    "kafka_network_requestmetrics_responsesendtimems",
};

static const char *const latency_help[LAT_COUNT] = {
    "Request time from dispatch to its response queued, ms",
    "Request time waiting to be dispatched, ms (0: dispatched at once)",
    "Request time being processed on the broker, ms",
    "Request time parked (long poll, flush, helper thread), ms",
    "Response send time, ms (not timed: 0)",
};

static const double latency_bounds[] = {1,   2,    5,    10,   25,    50,   100,
                                        250, 500, 1000, 2500, 5000, 10000, 30000};

typedef struct topic_block {
    char *name;
    uint64_t hash;
    kb_metric_series *s[TC_COUNT];
} topic_block;

typedef struct api_block {
    bool made;
    kb_metric_series *requests;
    kb_metric_series *lat[LAT_COUNT];
} api_block;

struct kb_req_metrics {
    kb_metrics *m;
    kb_metric_family *topic_fam[TC_COUNT];
    kb_metric_series *all_topics[TC_COUNT];
    kb_metric_family *requests_fam;
    kb_metric_family *lat_fam[LAT_COUNT];
    kb_metric_family *throttle_fam;
    api_block apis[API_SLOTS];
    kb_map topics; /* name -> topic_block */
};

static const char *const topic_label[] = {"topic"};
static const char *const request_label[] = {"request"};
static const char *const throttle_labels[] = {"resource", "user", "clientId"};

static void make_families(kb_req_metrics *rm)
{
    for (int i = 0; i < TC_COUNT; i++) {
        rm->topic_fam[i] = kb_metrics_family(rm->m, topic_counter_names[i], topic_counter_help[i],
                                             KB_METRIC_COUNTER, 1, topic_label, NULL, 0);
        rm->all_topics[i] = kb_metric_get(rm->topic_fam[i], NULL);
    }
    rm->requests_fam = kb_metrics_family(rm->m, "kafka_network_requestmetrics_requests_total",
                                         "Requests finished, by API", KB_METRIC_COUNTER, 1,
                                         request_label, NULL, 0);
    for (int i = 0; i < LAT_COUNT; i++) {
        rm->lat_fam[i] = kb_metrics_family(rm->m, latency_names[i], latency_help[i],
                                           KB_METRIC_HISTOGRAM, 1, request_label, latency_bounds,
                                           sizeof latency_bounds / sizeof latency_bounds[0]);
    }
    rm->throttle_fam = kb_metrics_family(rm->m, "kafka_server_quota_throttle_time",
                                         "Throttle time of the latest throttled request, ms",
                                         KB_METRIC_GAUGE, 3, throttle_labels, NULL, 0);
}

kb_req_metrics *kb_req_metrics_new(kb_metrics *m)
{
    kb_req_metrics *rm = calloc(1, sizeof *rm);
    if (rm == NULL) {
        return NULL;
    }
    rm->m = m;
    kb_map_init(&rm->topics);
    make_families(rm);
    return rm;
}

void kb_req_metrics_free(kb_req_metrics *rm)
{
    if (rm == NULL) {
        return;
    }
    size_t cursor = 0;
    topic_block *tb;
    while ((tb = kb_map_next(&rm->topics, &cursor)) != NULL) {
        free(tb->name);
        free(tb);
    }
    kb_map_fini(&rm->topics);
    free(rm);
}

/* Kafka's request names: Fetch from consumers is "FetchConsumer". */
static const char *request_name(const kb_req *req)
{
    return req->api_key == KP_API_FETCH ? "FetchConsumer" : req->api->name;
}

static api_block *api_series(kb_req_metrics *rm, const kb_req *req)
{
    if (req->api_key < 0 || req->api_key >= API_SLOTS || req->api == NULL) {
        return NULL;
    }
    api_block *ab = &rm->apis[req->api_key];
    if (!ab->made) {
        ab->made = true; /* once: a dropped series is not retried */
        const char *name[] = {request_name(req)};
        ab->requests = kb_metric_get(rm->requests_fam, name);
        for (int i = 0; i < LAT_COUNT; i++) {
            ab->lat[i] = kb_metric_get(rm->lat_fam[i], name);
        }
    }
    return ab;
}

static bool block_match(const void *entry, const void *key)
{
    const topic_block *tb = entry;
    const kp_str *name = key;
    return strlen(tb->name) == (size_t)name->len && memcmp(tb->name, name->p, (size_t)name->len) == 0;
}

static topic_block *block_new(kb_req_metrics *rm, const char *name, uint64_t hash)
{
    topic_block *tb = calloc(1, sizeof *tb);
    char *copy = strdup(name);
    if (tb == NULL || copy == NULL || kb_map_insert(&rm->topics, hash, tb) != KP_ERR_NONE) {
        free(tb);
        free(copy);
        return NULL;
    }
    tb->name = copy;
    tb->hash = hash;
    const char *v[] = {copy};
    for (int i = 0; i < TC_COUNT; i++) {
        tb->s[i] = kb_metric_get(rm->topic_fam[i], v);
    }
    return tb;
}

/* The counters of an existing topic (by name or, when name is empty, id). */
static topic_block *topic_series(kb_req_metrics *rm, const kb_broker *b, kp_str name,
                                 const kp_uuid *id)
{
    const kb_topic *t = NULL;
    if (name.len <= 0 && id != NULL) {
        t = kb_topics_find_id(b->topics, id);
        if (t == NULL) {
            return NULL;
        }
        name = (kp_str){t->name, (int32_t)strlen(t->name)};
    }
    uint64_t hash = kb_map_hash_str(name);
    topic_block *tb = kb_map_find(&rm->topics, hash, &name, block_match);
    if (tb != NULL) {
        return tb;
    }
    if (t == NULL && (t = kb_topics_find(b->topics, name)) == NULL) {
        return NULL;
    }
    if (kb_map_count(&rm->topics) >= kb_metrics_max_series(rm->m)) {
        return NULL; /* past the cap every series would be dropped anyway */
    }
    return block_new(rm, t->name, hash);
}

static void count(kb_req_metrics *rm, topic_block *tb, enum topic_counter c, double v)
{
    kb_metric_add(rm->all_topics[c], v);
    if (tb != NULL) {
        kb_metric_add(tb->s[c], v);
    }
}

/* Records in a produce partition's batches (legacy message sets: one per
 * message, a compressed wrapper counting once). */
static int64_t record_count(const kp_records *r)
{
    int64_t n = 0;
    size_t off = 0, len = r->p != NULL && r->len > 0 ? (size_t)r->len : 0;
    while (len - off >= 12 + 5) {
        int64_t total = 12 + (int64_t)kp_be32_get(r->p + off + 8);
        if (total < 12 + 5 || (uint64_t)total > len - off) {
            break;
        }
        kp_batch_hdr h;
        bool v2 = r->p[off + KP_BATCH_OFF_MAGIC] == 2;
        n += v2 && kp_batch_hdr_parse(r->p + off, len - off, &h) == KP_ERR_NONE
                 ? h.records_count
                 : 1;
        off += (size_t)total;
    }
    return n;
}

static void count_produce(kb_req_metrics *rm, const kb_req *req)
{
    const kp_produce_req *rq = req->request;
    const kp_produce_resp *rs = req->response;
    for (int32_t i = 0; rq != NULL && rs != NULL && i < rq->topic_data.n; i++) {
        const kp_produce_req_topic_produce_data *td = &rq->topic_data.v[i];
        topic_block *tb = topic_series(rm, req->broker, td->name, &td->topic_id);
        const kp_produce_resp_topic_produce_response *tr =
            i < rs->responses.n ? &rs->responses.v[i] : NULL;
        bool failed = false;
        count(rm, tb, TC_TOTAL_PRODUCE, 1);
        for (int32_t j = 0; j < td->partition_data.n; j++) {
            const kp_records *recs = &td->partition_data.v[j].records;
            double bytes = recs->len > 0 ? recs->len : 0;
            bool ok = tr != NULL && j < tr->partition_responses.n &&
                      tr->partition_responses.v[j].error_code == 0;
            if (ok) {
                count(rm, tb, TC_MESSAGES_IN, (double)record_count(recs));
                count(rm, tb, TC_BYTES_IN, bytes);
            } else {
                count(rm, tb, TC_BYTES_REJECTED, bytes);
                failed = true;
            }
        }
        if (failed) {
            count(rm, tb, TC_FAILED_PRODUCE, 1);
        }
    }
}

static void count_fetch(kb_req_metrics *rm, const kb_req *req)
{
    const kp_fetch_resp *rs = req->response;
    for (int32_t i = 0; rs != NULL && i < rs->responses.n; i++) {
        const kp_fetch_resp_fetchable_topic_response *tr = &rs->responses.v[i];
        topic_block *tb = topic_series(rm, req->broker, tr->topic, &tr->topic_id);
        bool failed = false;
        count(rm, tb, TC_TOTAL_FETCH, 1);
        for (int32_t j = 0; j < tr->partitions.n; j++) {
            const kp_fetch_resp_partition_data *pd = &tr->partitions.v[j];
            if (pd->error_code != 0) {
                failed = true;
            }
            int32_t len = pd->records.file != NULL ? pd->records.file->len : pd->records.len;
            count(rm, tb, TC_BYTES_OUT, len > 0 ? len : 0);
        }
        if (failed) {
            count(rm, tb, TC_FAILED_FETCH, 1);
        }
    }
}

static void record_throttle(kb_req_metrics *rm, kb_req *req, int64_t throttle_ms)
{
    const char *principal = req->conn->principal;
    const char *user = strncmp(principal, "User:", 5) == 0 ? principal + 5 : principal;
    const char *v[] = {req->quota == KB_REQ_QUOTA_PRODUCE ? "Produce" : "Fetch", user,
                       kb_req_cstr(req, req->client_id)};
    kb_metric_set(kb_metric_get(rm->throttle_fam, v), (double)throttle_ms);
}

void kb_req_metrics_finish(kb_req *req, bool parked, int64_t throttle_ms)
{
    kb_req_metrics *rm = req->broker->req_metrics;
    if (rm == NULL) {
        return;
    }
    api_block *ab = api_series(rm, req);
    if (ab != NULL) {
        int64_t total = kb_loop_now_ms(req->broker->loop) - req->start_ms;
        int64_t held = throttle_ms < total ? throttle_ms : total;
        int64_t remote = parked ? total - held : 0;
        kb_metric_add(ab->requests, 1);
        kb_metric_observe(ab->lat[LAT_TOTAL], (double)total);
        kb_metric_observe(ab->lat[LAT_QUEUE], 0);
        kb_metric_observe(ab->lat[LAT_LOCAL], (double)(total - held - remote));
        kb_metric_observe(ab->lat[LAT_REMOTE], (double)remote);
        kb_metric_observe(ab->lat[LAT_SEND], 0);
    }
    if (req->api_key == KP_API_PRODUCE) {
        count_produce(rm, req);
    } else if (req->api_key == KP_API_FETCH) {
        count_fetch(rm, req);
    }
    if (throttle_ms > 0) {
        record_throttle(rm, req, throttle_ms);
    }
}
