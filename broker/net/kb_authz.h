/*
 * kb_authz: authorization of requests against the ACL store (kb_acl.h),
 * the way Kafka's KafkaApis / AuthHelper ask its authorizer.
 *
 * Job: one small entry point for handlers. Without an authorizer
 * (authorizer.class.name empty) b->acl is NULL and kb_authz() costs one
 * branch and allows everything, as Kafka does; with one, the request's
 * principal (kb_conn.principal) and client address (kb_conn.peer without
 * the port) are checked with kb_acl_authorize().
 *
 * Where each request is checked (Kafka 4.1's KafkaApis; resource name in
 * brackets, CLUSTER is always "kafka-cluster"):
 *
 *   request              check                              denied with
 *   -------------------  ---------------------------------  -------------------------------
 *   Produce              TRANSACTIONAL_ID WRITE [txn id]    TRANSACTIONAL_ID_AUTHORIZATION_
 *                        when the batch is transactional    FAILED on every partition
 *                        TOPIC WRITE [topic]                TOPIC_AUTHORIZATION_FAILED per
 *                                                           partition (before existence)
 *   Fetch (consumer)     TOPIC READ [topic]                 TOPIC_AUTHORIZATION_FAILED
 *   ListOffsets          TOPIC DESCRIBE [topic]             TOPIC_AUTHORIZATION_FAILED
 *   OffsetForLeaderEpoch TOPIC DESCRIBE [topic]             TOPIC_AUTHORIZATION_FAILED
 *   Metadata             TOPIC DESCRIBE [topic]             all topics: left out; named:
 *                                                           TOPIC_AUTHORIZATION_FAILED
 *                        auto-create: CLUSTER CREATE or     TOPIC_AUTHORIZATION_FAILED
 *                        TOPIC CREATE [topic]
 *                        authorized-operations bitfields:   cluster: 0 without CLUSTER
 *                        every supported op checked         DESCRIBE (v8-v10)
 *   CreateTopics         CLUSTER CREATE or TOPIC CREATE     TOPIC_AUTHORIZATION_FAILED
 *   DeleteTopics         TOPIC DELETE [topic]               TOPIC_AUTHORIZATION_FAILED
 *   CreatePartitions     TOPIC ALTER [topic]                TOPIC_AUTHORIZATION_FAILED
 *   DescribeConfigs      TOPIC / CLUSTER DESCRIBE_CONFIGS   TOPIC_ / CLUSTER_AUTHORIZATION_
 *                                                           FAILED per resource
 *   AlterConfigs,        TOPIC / CLUSTER ALTER_CONFIGS      TOPIC_ / CLUSTER_AUTHORIZATION_
 *   IncrementalAlter..                                      FAILED per resource
 *   FindCoordinator      GROUP DESCRIBE [group] (key 0)     GROUP_AUTHORIZATION_FAILED
 *                        TRANSACTIONAL_ID DESCRIBE (key 1)  TRANSACTIONAL_ID_AUTHORIZATION_
 *                                                           FAILED
 *   JoinGroup, SyncGroup GROUP READ [group]                 GROUP_AUTHORIZATION_FAILED
 *   Heartbeat,LeaveGroup
 *   OffsetCommit         GROUP READ [group], then           GROUP_AUTHORIZATION_FAILED /
 *                        TOPIC READ [topic]                 TOPIC_AUTHORIZATION_FAILED
 *   OffsetFetch          GROUP DESCRIBE [group], then       GROUP_AUTHORIZATION_FAILED /
 *                        TOPIC DESCRIBE [topic]             TOPIC_AUTHORIZATION_FAILED
 *                                                           (all partitions: left out)
 *   DescribeGroups       GROUP DESCRIBE [group]             GROUP_AUTHORIZATION_FAILED
 *   ListGroups           CLUSTER DESCRIBE, else each        groups left out
 *                        group's GROUP DESCRIBE
 *   DeleteGroups         GROUP DELETE [group]               GROUP_AUTHORIZATION_FAILED
 *   ConsumerGroup-       GROUP READ [group], then TOPIC     GROUP_ / TOPIC_AUTHORIZATION_
 *   Heartbeat            DESCRIBE [each subscribed name]    FAILED
 *   ConsumerGroup-       GROUP DESCRIBE [group]             GROUP_AUTHORIZATION_FAILED
 *   Describe
 *   InitProducerId       transactional: TRANSACTIONAL_ID    TRANSACTIONAL_ID_AUTHORIZATION_
 *                        WRITE [txn id]; idempotent:        FAILED / CLUSTER_AUTHORIZATION_
 *                        CLUSTER IDEMPOTENT_WRITE or WRITE  FAILED
 *                        on some topic (by resource type)
 *   AddPartitionsToTxn   TRANSACTIONAL_ID WRITE, then TOPIC TRANSACTIONAL_ID_ / TOPIC_AUTHORIZA-
 *   (v0-v3, clients)     WRITE (internal topics exempt)     TION_FAILED (others OPERATION_
 *                                                           NOT_ATTEMPTED)
 *   AddOffsetsToTxn      TRANSACTIONAL_ID WRITE, GROUP READ TRANSACTIONAL_ID_ / GROUP_..._FAILED
 *   EndTxn               TRANSACTIONAL_ID WRITE             TRANSACTIONAL_ID_AUTHORIZATION_
 *                                                           FAILED
 *   TxnOffsetCommit      TRANSACTIONAL_ID WRITE, GROUP      as OffsetCommit
 *                        READ, TOPIC READ
 *   DescribeTransactions TRANSACTIONAL_ID DESCRIBE          TRANSACTIONAL_ID_AUTHORIZATION_
 *                                                           FAILED
 *   ListTransactions     TRANSACTIONAL_ID DESCRIBE          left out
 *   OffsetDelete         GROUP DELETE, TOPIC READ           GROUP_ / TOPIC_AUTHORIZATION_FAILED
 *   DeleteRecords        TOPIC DELETE                       TOPIC_AUTHORIZATION_FAILED
 *   DescribeProducers    TOPIC READ                         TOPIC_AUTHORIZATION_FAILED
 *   DescribeTopicParti-  TOPIC DESCRIBE                     all topics: left out; named:
 *   tions                                                   TOPIC_AUTHORIZATION_FAILED
 *   DescribeCluster      cluster authorized operations      0 without CLUSTER DESCRIBE
 *   DescribeLogDirs      CLUSTER DESCRIBE                   CLUSTER_AUTHORIZATION_FAILED
 *   DescribeQuorum       CLUSTER DESCRIBE                   CLUSTER_AUTHORIZATION_FAILED
 *   ElectLeaders,        CLUSTER ALTER                      CLUSTER_AUTHORIZATION_FAILED
 *   AlterPartitionReas.
 *   ListPartitionReas.   CLUSTER DESCRIBE                   CLUSTER_AUTHORIZATION_FAILED
 *   Describe/AlterUser-  CLUSTER DESCRIBE / ALTER           CLUSTER_AUTHORIZATION_FAILED
 *   ScramCredentials
 *   DescribeClient-      CLUSTER DESCRIBE_CONFIGS /         CLUSTER_AUTHORIZATION_FAILED
 *   Quotas / Alter..     ALTER_CONFIGS
 *   DescribeAcls         CLUSTER DESCRIBE                   CLUSTER_AUTHORIZATION_FAILED
 *   CreateAcls,          CLUSTER ALTER                      CLUSTER_AUTHORIZATION_FAILED
 *   DeleteAcls                                              per entry
 *   ApiVersions, SASL    none
 *   Delegation tokens    none: tokens are off (kb_h_tokens.c)
 *
 * Invariants:
 *   1. With no authorizer every check allows and no ACL code runs.
 *   2. A check never allocates and never fails for another reason than
 *      the decision.
 *
 * Ownership: borrows the request; keeps nothing.
 * Threading: loop thread only.
 */
#ifndef KB_AUTHZ_H
#define KB_AUTHZ_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "kb_acl.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_req.h"

static inline kp_str kb_cstr(const char *s)
{
    return (kp_str){s, (int32_t)strlen(s)};
}

/* Whether an authorizer is configured. */
static inline bool kb_authz_on(const kb_req *req)
{
    return req->broker->acl != NULL;
}

/* The slow path of kb_authz(): asks the store. */
bool kb_authz_check(const kb_req *req, int8_t op, int8_t res_type, kp_str name);

/* May the request's principal perform op on the literal resource? */
static inline bool kb_authz(const kb_req *req, int8_t op, int8_t res_type, kp_str name)
{
    return req->broker->acl == NULL || kb_authz_check(req, op, res_type, name);
}

/* kb_authz() on a topic named by a C string (a registry name). */
static inline bool kb_authz_topic(const kb_req *req, int8_t op, const char *name)
{
    return req->broker->acl == NULL || kb_authz_check(req, op, KB_RES_TOPIC, kb_cstr(name));
}

/* Creating the topic (auto-create or CreateTopics): CLUSTER CREATE, else
 * TOPIC CREATE on its name. */
bool kb_authz_create_topic(const kb_req *req, kp_str name);

/* A member's heartbeat to a modern (consumer or share) group, as Kafka's
 * KafkaApis checks it: GROUP READ, then TOPIC DESCRIBE on every name it
 * subscribes to; KP_ERR_NONE or the *_AUTHORIZATION_FAILED code. */
int16_t kb_authz_group_member(const kb_req *req, kp_str group_id, const kp_str *topics,
                              int32_t ntopics);

/* kb_authz() on the CLUSTER resource. */
bool kb_authz_cluster(const kb_req *req, int8_t op);

/* DescribeConfigs / AlterConfigs on a config resource (Kafka's
 * ConfigResource type codes: 2 topic, 4 broker, 8 broker logger, 16 client
 * metrics, 32 group): KP_ERR_NONE, or the resource's *_AUTHORIZATION_FAILED
 * code. op is DESCRIBE_CONFIGS or ALTER_CONFIGS. */
int16_t kb_authz_config(const kb_req *req, int8_t op, int8_t config_type, kp_str name);

/* Kafka's default message of an *_AUTHORIZATION_FAILED code
 * ("Topic authorization failed."), "" for other codes. */
const char *kb_authz_message(int16_t code);

/* Kafka's authorizeByResourceType: op allowed on some resource of the type. */
bool kb_authz_any(const kb_req *req, int8_t op, int8_t res_type);

/* The authorized-operations bitfield Kafka reports for a resource: a bit
 * (1 << code) for each operation the type supports that is allowed. */
int32_t kb_authz_ops(const kb_req *req, int8_t res_type, kp_str name);

#endif
