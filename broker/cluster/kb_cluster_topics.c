#include "kb_cluster_topics.h"

#include <stdio.h>
#include <string.h>

#include "kb_cluster.h"
#include "kb_config.h"
#include "kb_topics.h"

#define INTERNAL_SEGMENT_BYTES "104857600" /* offsets.topic.segment.bytes' default */
#define OFFSETS_TOPIC "__consumer_offsets"
#define TXN_TOPIC "__transaction_state"

static const char *const offsets_configs[] = {
    "cleanup.policy", "compact", "compression.type", "producer",
    "segment.bytes", INTERNAL_SEGMENT_BYTES, NULL,
};

bool kb_cluster_topics_internal_pending(kb_broker *b, const char *name)
{
    kb_forward *f = kb_cluster_forwarder(b->cluster);
    if (f == NULL || kb_topics_find(b->topics, kp_str_from(name)) != NULL)
        return false;
    const kb_config *cfg = b->cfg;
    if (strcmp(name, OFFSETS_TOPIC) == 0) {
        kb_forward_topic t = {name, cfg->offsets_topic_num_partitions,
                              (int16_t)cfg->offsets_topic_replication_factor, offsets_configs};
        kb_forward_create_topic(f, &t, NULL);
    } else if (strcmp(name, TXN_TOPIC) == 0) {
        char min_isr[16];
        snprintf(min_isr, sizeof min_isr, "%d", cfg->transaction_state_log_min_isr);
        const char *const txn_configs[] = {
            "unclean.leader.election.enable", "false", "compression.type", "uncompressed",
            "cleanup.policy", "compact", "min.insync.replicas", min_isr,
            "segment.bytes", INTERNAL_SEGMENT_BYTES, NULL,
        };
        kb_forward_topic t = {name, cfg->transaction_state_log_num_partitions,
                              (int16_t)cfg->transaction_state_log_replication_factor, txn_configs};
        kb_forward_create_topic(f, &t, NULL);
    }
    return true;
}

bool kb_cluster_topics_auto_create(kb_broker *b, kp_str name, const kb_req *req)
{
    kb_forward *f = kb_cluster_forwarder(b->cluster);
    if (f == NULL)
        return false;
    char topic[256];
    if (name.len <= 0 || (size_t)name.len >= sizeof topic)
        return true;
    memcpy(topic, name.p, (size_t)name.len);
    topic[name.len] = '\0';
    kb_forward_topic t = {topic, b->cfg->num_partitions,
                          (int16_t)b->cfg->default_replication_factor, NULL};
    kb_forward_create_topic(f, &t, req);
    return true;
}
