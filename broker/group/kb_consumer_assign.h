/*
 * kb_consumer_assign: the server-side assignors of KIP-848 consumer groups,
 * "uniform" (Kafka's default) and "range".
 *
 * Job: from the members' subscriptions and the subscribed topics, compute
 * each member's target partitions (member->target, replaced).
 *   uniform: balanced (counts within one of each other where subscriptions
 *     allow) and sticky (a member keeps what it had up to its share);
 *     homogeneous groups in O(partitions + members), mixed subscriptions
 *     greedily (least loaded eligible member) then rebalanced.
 *   range: per topic, the subscribed members in member id order take
 *     contiguous ranges, the first (partitions % members) one more.
 *
 * Invariants: every partition of a subscribed topic goes to exactly one
 * member subscribed to it; no member gets a partition of a topic it does
 * not subscribe to.
 *
 * Ownership: members are borrowed; only their target sets change. topics
 * (sorted by name) are borrowed for the call.
 *
 * Threading: no shared state.
 *
 * Errors: KP_ERR__NOMEM (the targets are then unspecified).
 */
#ifndef KB_CONSUMER_ASSIGN_H
#define KB_CONSUMER_ASSIGN_H

#include "kb_consumer_group.h"

kp_err kb_consumer_assign_uniform(kb_cg_member **members, int32_t n, const kb_cg_topic *topics,
                          int32_t ntopics);
kp_err kb_consumer_assign_range(kb_cg_member **members, int32_t n, const kb_cg_topic *topics,
                        int32_t ntopics);

#endif
