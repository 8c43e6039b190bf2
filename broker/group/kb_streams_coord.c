#include "kb_streams_coord.h"

#include <stdlib.h>
#include <string.h>

#include "kb_config_edit.h"
#include "kb_group_conf.h"
#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_msgbuf.h"
#include "kb_partition_dirs.h"
#include "kb_topic_conf.h"
#include "kb_topics.h"

static int cmp_conf(const void *a, const void *b)
{
    return strcmp(((const kb_topic_config *)a)->key, ((const kb_topic_config *)b)->key);
}

/* The configs Runnel knows, sorted by key, repeats dropped (the later wins
 * as Kafka's map would keep it). */
static int32_t known_configs(char *const *kv, int32_t n, kb_topic_config *out, const char *topic)
{
    int32_t k = 0;
    kb_msgbuf msg;
    for (int32_t i = n - 1; i >= 0; i--) {
        bool seen = false;
        for (int32_t j = 0; j < k && !seen; j++)
            seen = strcmp(out[j].key, kv[2 * i]) == 0;
        if (seen)
            continue;
        if (kb_topic_conf_check(kv[2 * i], kv[2 * i + 1], &msg) != KP_ERR_NONE) {
            KB_LOG(KB_LL_WARN, KB_SUB_GROUP, "msg=\"internal topic config left out\" topic=%s "
                   "key=%s", topic, kv[2 * i]);
            continue;
        }
        out[k].key = kv[2 * i];
        out[k++].value = kv[2 * i + 1];
    }
    qsort(out, (size_t)k, sizeof(*out), cmp_conf);
    return k;
}

kp_err kb_streams_coord_create_topic(kb_broker *b, const char *name, int32_t partitions,
                                     char *const *configs, int32_t nconfigs)
{
    if (b->cluster != NULL)
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    kp_str n = kp_str_from(name);
    if (kb_topics_busy(b->topics, n) != NULL)
        return KP_ERR_NONE; /* being made */
    kb_topic_config *cv = calloc((size_t)nconfigs + 1, sizeof(*cv));
    if (cv == NULL)
        return KP_ERR__NOMEM;
    int32_t nc = known_configs(configs, nconfigs, cv, name);
    kb_msgbuf msg;
    kb_topic *t;
    kp_err e;
    if (partitions <= KB_PARTITION_DIRS_STEP) {
        e = kb_topics_create(b->topics, n, partitions, cv, (size_t)nc, false, &t, &msg);
    } else {
        e = kb_topics_begin_create(b->topics, n, partitions, cv, (size_t)nc, false, &t, &msg);
        if (e == KP_ERR_NONE)
            e = kb_partition_dirs_create(b, t, NULL, NULL);
    }
    free(cv);
    if (e != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_GROUP, "msg=\"cannot create internal topic\" topic=%s "
               "error=%s", name, kp_err_name(e));
    else
        KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"streams internal topic created\" topic=%s "
               "partitions=%d", name, partitions);
    return e;
}

int32_t kb_streams_coord_heartbeat_ms(kb_broker *b, const kb_group *g)
{
    return kb_group_conf_int(b->gconf, kp_str_from(g->id), "streams.heartbeat.interval.ms",
                             b->cfg->group_streams_heartbeat_interval_ms);
}

void kb_streams_coord_env_for(kb_broker *b, const kb_group *g, kb_streams_group_env *out)
{
    kp_str id = kp_str_from(g->id);
    out->topics = kb_group_coord_cgroup_env(b);
    out->create_topic = NULL; /* the heartbeat's handler sets its authorized creator */
    out->create_ctx = NULL;
    out->heartbeat_interval_ms = kb_streams_coord_heartbeat_ms(b, g);
    out->session_timeout_ms = kb_group_conf_int(b->gconf, id, "streams.session.timeout.ms",
                                                b->cfg->group_streams_session_timeout_ms);
    out->num_standby = kb_group_conf_int(b->gconf, id, "streams.num.standby.replicas",
                                         b->cfg->group_streams_num_standby_replicas);
    out->max_size = b->cfg->group_max_size;
    out->initial_delay_ms = b->cfg->group_streams_initial_rebalance_delay_ms;
}
