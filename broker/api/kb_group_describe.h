/*
 * kb_group_describe: what the describe APIs of the KIP-848-style groups
 * (ConsumerGroupDescribe, ShareGroupDescribe, StreamsGroupDescribe) check
 * of each group id before describing it, in Kafka's order: a valid id, the
 * principal's DESCRIBE on the group (and its authorized operations when
 * asked), a group of the API's kind.
 *
 * Threading: loop thread. Ownership: messages live in the request's arena.
 */
#ifndef KB_GROUP_DESCRIBE_H
#define KB_GROUP_DESCRIBE_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_group_coord.h"
#include "kb_req.h"

/* The group id names, when it is of kind k; else NULL with *err
 * (INVALID_GROUP_ID, GROUP_AUTHORIZATION_FAILED, GROUP_ID_NOT_FOUND and
 * Kafka's message in *msg). *ops is set when ops is true and allowed. */
const kb_group *kb_group_describe_find(kb_req *req, kp_str id, bool ops, const kb_group_kind *k,
                                       int16_t *err, kp_str *msg, int32_t *ops_out);

/* A described group's final error code, in Kafka's order: the protocol's
 * feature off (UNSUPPORTED_VERSION), no __consumer_offsets yet
 * (COORDINATOR_NOT_AVAILABLE), the error found so far, else whether this
 * broker coordinates id. */
int16_t kb_group_describe_error(kb_req *req, bool feature_on, int16_t err, kp_str id);

#endif
