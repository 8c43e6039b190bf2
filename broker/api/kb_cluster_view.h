/*
 * kb_cluster_view: what the request handlers answer in cluster mode, read
 * from the metadata image (kb_cluster_image): the live brokers with their
 * endpoint for the listener a request came in on, a partition's leader,
 * epochs, replicas, ISR, ELR and offline replicas, whether this broker
 * leads a partition, which broker coordinates a group or transactional
 * id, and the finalized features.
 *
 * Invariants:
 *   1. Live means registered and unfenced; a broker with no endpoint of
 *      the request's listener name is not listed (as Kafka's metadata
 *      cache does).
 *   2. Outside cluster mode kb_cv_image is NULL and callers keep their
 *      single-node answers.
 * Ownership: strings returned borrow from the image, valid until the next
 * record is applied (the end of the handler, on the loop's thread).
 * Threading: the loop's thread only.
 * Errors: KP_ERR__NOMEM from the request's arena.
 */
#ifndef KB_CLUSTER_VIEW_H
#define KB_CLUSTER_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_meta_image.h"
#include "kb_req.h"
#include "kp_msg.h"

/* The image in cluster mode, else NULL. */
const kb_meta_image *kb_cv_image(const kb_req *req);
/* The finalized level of feature name: the image's in cluster mode, else
 * the single node's (kb_features); 0 when not finalized. */
int16_t kb_cv_feature_level(const kb_req *req, const char *name);
/* As Kafka: a group protocol whose feature is finalized below 1 is off and
 * its APIs answer UNSUPPORTED_VERSION (consumer groups: group.version,
 * share groups: share.version, streams groups: streams.version). */
static inline bool kb_cv_consumer_groups_on(const kb_req *req)
{
    return kb_cv_feature_level(req, "group.version") >= 1;
}
static inline bool kb_cv_share_groups_on(const kb_req *req)
{
    return kb_cv_feature_level(req, "share.version") >= 1;
}
static inline bool kb_cv_streams_groups_on(const kb_req *req)
{
    return kb_cv_feature_level(req, "streams.version") >= 1;
}
/* Whether broker id is registered and unfenced. */
bool kb_cv_live(const kb_meta_image *img, int32_t id);
/* Broker id's endpoint for req's listener name; false when none. */
bool kb_cv_endpoint(const kb_req *req, const kb_meta_image *img, int32_t id, kp_str *host,
                    int32_t *port, kp_str *rack);
/* Kafka 4 brokers answer Metadata and DescribeCluster with a random live
 * broker as the controller (clients cannot reach the controllers). */
int32_t kb_cv_controller_id(const kb_req *req, const kb_meta_image *img);

kp_err kb_cv_metadata_brokers(kb_req *req, const kb_meta_image *img, kp_metadata_resp *rs);
kp_err kb_cv_describe_cluster_brokers(kb_req *req, const kb_meta_image *img,
                                      kp_describe_cluster_resp *rs);
/* Copies of a partition's id list, and its replicas not live, in the
 * request's arena; false when out of memory. */
bool kb_cv_ids(kb_req *req, const kb_mi_ints *src, int32_t *n, int32_t **v);
bool kb_cv_offline(kb_req *req, const kb_meta_image *img, const kb_mi_partition *p, int32_t *n,
                   int32_t **v);
/* The partition's leader if live with an endpoint for req's listener, else
 * -1 (Kafka's LEADER_NOT_AVAILABLE). */
int32_t kb_cv_leader(const kb_req *req, const kb_meta_image *img, const kb_mi_partition *p);
bool kb_cv_internal(const kb_mi_topic *t);
/* A topic of the image as Metadata lists it. */
kp_err kb_cv_metadata_topic(kb_req *req, const kb_meta_image *img, const kb_mi_topic *t,
                            kp_metadata_resp_metadata_response_topic *out);

/* NOT_LEADER_OR_FOLLOWER when the image names another leader (or none)
 * for partition p of the topic of that id, UNKNOWN_TOPIC_OR_PARTITION when
 * the image lacks it, 0 when this broker leads it or outside cluster mode.
 * With NOT_LEADER_OR_FOLLOWER, *leader and *epoch receive the image's
 * leader (-1 none) and leader epoch; otherwise they are left as they are. */
int16_t kb_cv_check_leader(const kb_req *req, const kp_uuid *topic_id, int32_t p,
                           int32_t *leader, int32_t *epoch);

/* The broker coordinating key (a group or transactional id): the live
 * leader of key's partition of the internal topic (Kafka's hash of the
 * key); -1 when the image lacks the topic or that leader is not live. */
int32_t kb_cv_coordinator(const kb_req *req, const kb_meta_image *img, const char *topic,
                          kp_str key);
/* Whether this broker may act as key's coordinator: NONE outside cluster
 * mode or when it leads key's partition of topic and its coordinator has
 * loaded that partition, COORDINATOR_LOAD_IN_PROGRESS while it loads,
 * NOT_COORDINATOR when another broker leads it, COORDINATOR_NOT_AVAILABLE
 * when none does or the load failed (Kafka's answers: the retriable ones
 * send a client back to FindCoordinator or to retry). */
int16_t kb_cv_check_coordinator(const kb_req *req, const char *topic, kp_str key);

/* A leader named in a KIP-951 answer's NodeEndpoints. */
typedef struct kb_cv_node {
    int32_t node_id;
    kp_str host;
    int32_t port;
    kp_str rack;
} kb_cv_node;

/* The live brokers among ids[0..n) (duplicates and -1 skipped) with their
 * endpoint for req's listener, in the request's arena; *out NULL when
 * there are none. */
kp_err kb_cv_nodes(kb_req *req, const int32_t *ids, int32_t n, kb_cv_node **out, int32_t *nout);

#endif
