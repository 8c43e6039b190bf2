/* The console's topic routes: list, show, records, produce (kb_console_routes.h). */
#include <stdlib.h>
#include <string.h>

#include "kb_acl.h"
#include "kb_console_lag.h"
#include "kb_console_records.h"
#include "kb_console_routes.h"
#include "kb_partition_log.h"
#include "kb_topic_conf.h"
#include "kb_topics.h"
#include "kb_uuid.h"
#include "kp_records.h"

#define LIST_MAX (8 << 20)
#define SHOW_MAX (4 << 20)
#define PRODUCE_KEY_MAX 4096

static const char *const CONF_SOURCES[] = {"unknown", "topic", "dynamic broker", "dynamic default",
                                           "static broker", "default"};

static void partition_counts(const kb_topic *t, int64_t *size, int64_t *records)
{
    *size = 0;
    *records = 0;
    for (int32_t i = 0; i < t->npartitions; i++) {
        ks_log *log = t->partitions[i].log;
        if (log == NULL)
            continue;
        *size += ks_log_size(log);
        *records += ks_log_high_watermark(log) - ks_log_start_offset(log);
    }
}

void kb_console_topics_list(const kb_console_api *api, const kb_console_req *rq,
                            kb_console_resp *out)
{
    kb_topics *ts = api->b->topics;
    kb_json j;
    kb_json_init(&j, LIST_MAX);
    kb_json_obj(&j);
    kb_json_key(&j, "topics");
    kb_json_arr(&j);
    for (size_t i = 0, n = kb_topics_count(ts); i < n; i++) {
        const kb_topic *t = kb_topics_at(ts, i);
        if (!kb_console_allowed(api, rq, KB_OP_DESCRIBE, KB_RES_TOPIC, t->name))
            continue;
        int64_t size, records;
        partition_counts(t, &size, &records);
        kb_json_obj(&j);
        kb_json_kstr(&j, "name", t->name);
        kb_json_kbool(&j, "internal", t->internal);
        kb_json_kint(&j, "partitions", t->npartitions);
        kb_json_kint(&j, "replicationFactor", 1);
        kb_json_kint(&j, "size", size);
        kb_json_kint(&j, "records", records);
        kb_json_obj_end(&j);
    }
    kb_json_arr_end(&j);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

static void node_list(kb_json *j, const char *key, int32_t node)
{
    kb_json_key(j, key);
    kb_json_arr(j);
    kb_json_int(j, node);
    kb_json_arr_end(j);
}

static void partition_obj(kb_json *j, const kb_broker *b, const kb_topic *t, int32_t i)
{
    ks_log *log = t->partitions[i].log;
    kb_json_obj(j);
    kb_json_kint(j, "partition", i);
    kb_json_kint(j, "leader", b->node_id);
    kb_json_kint(j, "leaderEpoch", t->partitions[i].leader_epoch);
    node_list(j, "replicas", b->node_id);
    node_list(j, "isr", b->node_id);
    kb_json_kbool(j, "online", log != NULL);
    if (log != NULL) {
        kb_json_kint(j, "low", ks_log_start_offset(log));
        kb_json_kint(j, "high", ks_log_high_watermark(log));
        kb_json_kint(j, "size", ks_log_size(log));
        kb_json_kint(j, "segments", ks_log_segment_count(log));
    }
    kb_json_obj_end(j);
}

static void configs(kb_json *j, const kb_config *cfg, const kb_topic *t)
{
    kb_json_key(j, "configs");
    kb_json_arr(j);
    for (size_t i = 0, n = kb_topic_conf_count(); i < n; i++) {
        const char *key = kb_topic_conf_key(i);
        int8_t src = 0;
        const char *v = kb_topic_conf_effective(cfg, t, key, &src);
        kb_json_obj(j);
        kb_json_kstr(j, "name", key);
        kb_json_kstr(j, "value", v);
        bool known = src >= 0 && (size_t)src < sizeof(CONF_SOURCES) / sizeof(CONF_SOURCES[0]);
        kb_json_kstr(j, "source", known ? CONF_SOURCES[src] : "unknown");
        kb_json_obj_end(j);
    }
    kb_json_arr_end(j);
}

/* The topic, or NULL with out filled (kb_console_gate). */
static kb_topic *visible_topic(const kb_console_api *api, const kb_console_req *rq, const char *name,
                               int8_t op, kb_console_resp *out)
{
    kb_topic *t = kb_topics_find(api->b->topics, kp_str_from(name));
    return kb_console_gate(api, rq, KB_RES_TOPIC, name, t != NULL, op, out) ? t : NULL;
}

void kb_console_topic_show(const kb_console_api *api, const kb_console_req *rq, const char *topic,
                           kb_console_resp *out)
{
    kb_topic *t = visible_topic(api, rq, topic, KB_OP_DESCRIBE, out);
    if (t == NULL)
        return;
    char id[23];
    kb_uuid_format(&t->id, id);
    kb_json j;
    kb_json_init(&j, SHOW_MAX);
    kb_json_obj(&j);
    kb_json_kstr(&j, "name", t->name);
    kb_json_kstr(&j, "topicId", id);
    kb_json_kbool(&j, "internal", t->internal);
    kb_json_key(&j, "partitions");
    kb_json_arr(&j);
    for (int32_t i = 0; i < t->npartitions; i++)
        partition_obj(&j, api->b, t, i);
    kb_json_arr_end(&j);
    configs(&j, api->b->cfg, t);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

/* The partition=P parameter's log; NULL with out filled. */
static ks_log *partition_log(const kb_console_api *api, const kb_console_req *rq, kb_topic *t,
                             int32_t *partition, kb_console_resp *out)
{
    int64_t p = 0;
    if (strstr(rq->query, "partition=") != NULL && !kb_console_query_long(rq->query, "partition", &p)) {
        kb_console_error(out, 400, "partition must be a number");
        return NULL;
    }
    if (p < 0 || p >= t->npartitions) {
        kb_console_error(out, 404, "no such partition");
        return NULL;
    }
    ks_log *log;
    if (kb_partition_log_get(api->b, t, (int32_t)p, &log) != KP_ERR_NONE) {
        kb_console_error(out, 503, "the partition is not online yet");
        return NULL;
    }
    *partition = (int32_t)p;
    return log;
}

/* The first offset to show: offset=O, or the first at or after
 * timestamp=T, or the log start. */
static int64_t start_offset(ks_log *log, const char *query)
{
    int64_t v;
    if (kb_console_query_long(query, "offset", &v))
        return v;
    if (kb_console_query_long(query, "timestamp", &v)) {
        int64_t off, ts;
        kp_errctx ctx = {0};
        if (ks_log_offset_for_time(log, v, &off, &ts, &ctx) == KP_ERR_NONE)
            return off;
        return ks_log_high_watermark(log);
    }
    return ks_log_start_offset(log);
}

void kb_console_topic_records(const kb_console_api *api, const kb_console_req *rq,
                              const char *topic, kb_console_resp *out)
{
    int32_t partition;
    kb_topic *t = visible_topic(api, rq, topic, KB_OP_READ, out);
    ks_log *log = t ? partition_log(api, rq, t, &partition, out) : NULL;
    if (log == NULL)
        return;
    int64_t max = 50;
    if (kb_console_query_long(rq->query, "max", &max) && (max < 1 || max > KB_CONSOLE_RECORDS_MAX))
        max = KB_CONSOLE_RECORDS_MAX;
    int64_t from = start_offset(log, rq->query);
    kb_json j;
    kb_json_init(&j, KB_CONSOLE_BODY_MAX);
    kb_json_obj(&j);
    kb_json_kstr(&j, "topic", t->name);
    kb_json_kint(&j, "partition", partition);
    kb_json_kint(&j, "low", ks_log_start_offset(log));
    kb_json_kint(&j, "high", ks_log_high_watermark(log));
    kp_err e = kb_console_records_read(log, from, (int32_t)max, &j);
    kb_json_kstr(&j, "readError", e == KP_ERR_NONE ? NULL : kp_err_name(e));
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

static void produced(kb_console_resp *out, int32_t partition, int64_t offset)
{
    kb_json j;
    kb_json_init(&j, 4096);
    kb_json_obj(&j);
    kb_json_kint(&j, "partition", partition);
    kb_json_kint(&j, "offset", offset);
    kb_json_obj_end(&j);
    kb_console_send(&j, out);
}

void kb_console_topic_produce(const kb_console_api *api, const kb_console_req *rq,
                              const char *topic, kb_console_resp *out)
{
    int32_t partition;
    kb_topic *t = visible_topic(api, rq, topic, KB_OP_WRITE, out);
    if (t == NULL || partition_log(api, rq, t, &partition, out) == NULL)
        return;
    if (rq->body_len > (size_t)api->b->cfg->message_max_bytes) {
        kb_console_error(out, 413, "the value is larger than message.max.bytes");
        return;
    }
    char key[PRODUCE_KEY_MAX];
    size_t key_len = 0;
    bool has_key = kb_console_query(rq->query, "key", key, sizeof(key), &key_len);
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, 0, -1, -1, -1);
    kp_slice k = has_key ? (kp_slice){(const uint8_t *)key, (int32_t)key_len} : (kp_slice){NULL, -1};
    kp_slice v = {rq->body, (int32_t)rq->body_len};
    kp_batch_builder_add(&bb, kb_console_wall_ms(), k, v, NULL, 0);
    size_t len;
    uint8_t *batch = kp_batch_builder_finish(&bb, &len);
    kp_batch_builder_fini(&bb);
    ks_append_result res;
    kp_err e = batch ? kb_partition_log_append(api->b, t, partition, batch, len, &res) : KP_ERR__NOMEM;
    free(batch);
    if (e != KP_ERR_NONE) {
        kb_console_error(out, 500, kp_err_name(e));
        return;
    }
    kb_partition_log_appended(api->b, t, partition);
    produced(out, partition, res.base_offset);
}
