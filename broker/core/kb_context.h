/*
 * kb_context: the broker's process-lifetime context, the one struct every
 * module is handed (nothing in the broker is a global).
 *
 * Job: name the loop, the frozen config and each subsystem's state. Every
 * subsystem sits behind an opaque pointer, so this header, at the bottom of
 * the house, depends on no room above it; a module reaches a subsystem's
 * state only through that subsystem's own header.
 *
 * Invariants:
 *   1. All state here is owned by the loop thread (no locks).
 *   2. cluster_id and node_id never change while the broker runs, and the
 *      cluster id persists in meta.properties of the first log dir.
 *   3. Each pointer is set by its subsystem's start function (called in
 *      order by kb_broker_start, kb_broker.h) and cleared by its stop.
 *
 * Ownership: kb_broker_start() creates everything; kb_broker_stop() frees
 * it. The config is borrowed and must outlive the broker.
 *
 * Threading: loop thread only.
 */
#ifndef KB_CONTEXT_H
#define KB_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_loop.h"
#include "kp_types.h"

typedef struct kb_config kb_config;
typedef struct kb_topics kb_topics;
typedef struct kb_conn kb_conn;
typedef struct kb_server kb_server;
typedef struct kb_group_coord kb_group_coord;
typedef struct kb_txn_coord kb_txn_coord;
typedef struct kb_req kb_req;
typedef struct kb_partition_log kb_partition_log;
typedef struct kb_work kb_work;
typedef struct kb_longpoll kb_longpoll;
typedef struct kb_scram_store kb_scram_store;
typedef struct kb_dynconf kb_dynconf;
typedef struct kb_features kb_features;
typedef struct kb_group_conf kb_group_conf;
typedef struct kb_quotas kb_quotas;
typedef struct kb_acl_store kb_acl_store;
typedef struct kb_metrics kb_metrics;
typedef struct kb_req_metrics kb_req_metrics;
typedef struct kb_observe kb_observe;
typedef struct kb_console kb_console;
typedef struct kb_cluster kb_cluster;

/* Where a whole request frame goes (kb_dispatch, api/kb_dispatch.h). */
typedef void kb_frame_fn(kb_conn *c, const uint8_t *frame, size_t len);

typedef struct kb_broker kb_broker;

/* Cluster mode's services to the rooms below cluster/ (the transaction
 * coordinator), set by kb_cluster_start (kb_interbroker.h); NULL on a
 * single node. Callbacks run later on the loop, never inside the call. */
typedef void kb_hook_marker_done(void *arg, int16_t error);
typedef void kb_hook_pids_done(kb_broker *b, int16_t error, int64_t start, int32_t len);
typedef struct kb_cluster_hooks {
    /* The leader of partition p of topic by the metadata image, -1: none. */
    int32_t (*leader)(kb_broker *b, const char *topic, int32_t p);
    /* WriteTxnMarkers of one partition to its leader node; done gets the
     * partition's error. An error return: not sent, done never runs. */
    kp_err (*send_marker)(kb_broker *b, int32_t node, const char *topic, int32_t p, int64_t pid,
                          int16_t epoch, bool commit, int32_t coordinator_epoch,
                          kb_hook_marker_done *done, void *arg);
    /* AllocateProducerIds to the active controller; done runs once. */
    kp_err (*alloc_pids)(kb_broker *b, kb_hook_pids_done *done);
} kb_cluster_hooks;

typedef struct kb_broker {
    const kb_config *cfg;
    kb_loop *loop;
    kb_frame_fn *dispatch; /* the request entry point, set by kb_broker_start */
    kb_topics *topics;
    kb_server *server;
    kb_group_coord *group_coord; /* the group coordinator (kb_group_coord.h) */
    kb_txn_coord *txn_coord; /* the transaction coordinator (kb_txn_coord.h) */
    kb_partition_log *partition_logs;
    kb_work *work; /* helper threads for CPU-heavy work */
    kb_longpoll *longpoll; /* parked long polls by partition (kb_longpoll.h) */
    kb_scram_store *scram; /* SCRAM credentials (kb_scram_store.h) */
    kb_dynconf *dynconf; /* dynamic broker configs (kb_admin.h) */
    kb_features *features; /* feature levels of a single node (kb_features.h) */
    kb_group_conf *gconf;     /* group configs (kb_group_conf.h) */
    kb_quotas *quotas;   /* client quotas (kb_quota.h) */
    kb_acl_store *acl;   /* ACLs; NULL without an authorizer (kb_acl.h, kb_authz.h) */
    /* metrics: all NULL unless runnel.metrics.listener is set (kb_observe.h) */
    kb_metrics *metrics;         /* the registry (kb_metrics.h) */
    kb_req_metrics *req_metrics; /* what the finish step counts (kb_req_metrics.h) */
    kb_observe *observe;         /* the /metrics endpoint (kb_observe.h) */
    kb_console *console;         /* the web console; NULL when off (kb_console.h) */
    kb_cluster *cluster; /* cluster mode; NULL without process.roles (kb_cluster.h) */
    const kb_cluster_hooks *hooks; /* cluster mode's hooks; NULL on one node */
    char cluster_id[64];
    int32_t node_id;
    int signal_fd;
    int64_t next_pid;      /* next producer id to hand out (kb_txn_coord.h) */
    int64_t pid_block_end; /* first id past the durably reserved block */
} kb_broker;

#endif
