/*
 * kb_streams_topology: the topology of a KIP-1071 streams group (Kafka
 * Streams with group.protocol=streams): its subtopologies, their source,
 * repartition and changelog topics, and the group's view of them against
 * the topics that exist.
 *
 * Job: copy a heartbeat's topology in, check it as Kafka's coordinator does
 * (STREAMS_INVALID_TOPOLOGY for repeated subtopology ids and copartition
 * indexes out of range, where Kafka 4.4.0 fails with UNKNOWN_SERVER_ERROR),
 * and "configure" it: each subtopology's task
 * count is the largest partition count of its source topics; a repartition
 * topic without a partition count takes that of the subtopology writing to
 * it (to a fixed point); changelog topics have their subtopology's count.
 * Internal topics that are missing are created through env.create_topic
 * with the counts and configs the topology asks for; whatever cannot be
 * resolved yields Kafka's statuses (MISSING_SOURCE_TOPICS,
 * INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS) and no tasks.
 *
 * Invariants:
 *   1. Subtopologies are sorted by id, no repeats; a task is (index of its
 *      subtopology in that order, partition).
 *   2. After configure, either every subtopology has ntasks >= 1 and there
 *      is no status, or every ntasks is 0.
 *   3. Counts are bounded (KB_ST_MAX_*): a longer topology is INVALID_REQUEST
 *      before anything is copied.
 *
 * Ownership: a topology owns every string in it. Threading: loop thread.
 * Errors: Kafka codes with a message, and KP_ERR__NOMEM.
 */
#ifndef KB_STREAMS_TOPOLOGY_H
#define KB_STREAMS_TOPOLOGY_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_consumer_group.h"
#include "kp_msg.h"
#include "kp_types.h"

#define KB_ST_MAX_SUBTOPOLOGIES 10000
#define KB_ST_MAX_TOPICS        10000 /* per subtopology and kind */
#define KB_ST_MAX_CONFIGS       1000  /* per internal topic */
#define KB_ST_MAX_PARTITIONS    100000

/* StreamsGroupHeartbeatResponse.Status codes (Kafka's). */
#define KB_ST_STALE_TOPOLOGY                 0
#define KB_ST_MISSING_SOURCE_TOPICS          1
#define KB_ST_INCORRECTLY_PARTITIONED_TOPICS 2
#define KB_ST_MISSING_INTERNAL_TOPICS        3
#define KB_ST_SHUTDOWN_APPLICATION           4
#define KB_ST_ASSIGNMENT_DELAYED             5
#define KB_ST_MAX_STATUS                     3 /* group-level ones at once */

typedef struct kb_st_topic {
    char *name;
    int32_t partitions; /* 0: derived */
    int16_t replication_factor;
    char **configs; /* key, value, key, value ... */
    int32_t nconfigs; /* pairs */
} kb_st_topic;

typedef struct kb_st_sub {
    char *id;
    char **sources;
    int32_t nsources;
    char **sinks; /* repartition topics it writes */
    int32_t nsinks;
    kb_st_topic *rsources; /* repartition topics it reads */
    int32_t nrsources;
    kb_st_topic *changelogs;
    int32_t nchangelogs;
    int32_t ntasks; /* 0 until configured */
} kb_st_sub;

typedef struct kb_st_status {
    int8_t code;
    char *detail;
} kb_st_status;

typedef struct kb_streams_topology {
    int32_t epoch;
    kb_st_sub *subs;
    int32_t nsubs;
    kb_st_status status[KB_ST_MAX_STATUS];
    int32_t nstatus;
} kb_streams_topology;

/* Creates an internal topic (configs as key/value pairs); KP_ERR_NONE when
 * it exists now or is being made, else why not (the status says so). */
typedef kp_err (*kb_st_create_fn)(void *ctx, const char *name, int32_t partitions,
                                  char *const *configs, int32_t nconfigs);

/* The checks of a heartbeat's topology: INVALID_REQUEST for sizes beyond
 * the bounds, STREAMS_INVALID_TOPOLOGY for repeated subtopology ids or
 * copartition indexes out of range; *msg says which. */
kp_err kb_streams_topology_check(const kp_streams_group_heartbeat_req_topology *rq,
                                 const char **msg);
kp_err kb_streams_topology_new(const kp_streams_group_heartbeat_req_topology *rq,
                               kb_streams_topology **out);
void kb_streams_topology_free(kb_streams_topology *t);

/* The index of subtopology id, or -1. */
int32_t kb_streams_topology_find(const kb_streams_topology *t, kp_str id);

/* A signature of the topics the topology reads (names, ids, partitions):
 * when it changes the group reconfigures. */
uint64_t kb_streams_topology_sig(const kb_streams_topology *t, const kb_consumer_group_env *env);

/* Resolves task counts and statuses (above), creating missing internal
 * topics with create (NULL: none are created). */
kp_err kb_streams_topology_configure(kb_streams_topology *t, const kb_consumer_group_env *env,
                                     kb_st_create_fn create, void *create_ctx);

/* Whether topic is one the topology reads (source or repartition). */
bool kb_streams_topology_reads(const kb_streams_topology *t, kp_str topic);

#endif
