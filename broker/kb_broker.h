/*
 * kb_broker: the broker's process-lifetime context, passed to every module.
 *
 * Job: hold the frozen config, the loop, the registries and the listening
 * sockets; start them in order and stop them in reverse.
 *
 * Invariants:
 *   1. All state here is owned by the loop thread (Redis style: no locks).
 *   2. cluster_id and node_id never change while the broker runs, and the
 *      cluster id persists in meta.properties of the first log dir.
 *
 * Ownership: kb_broker_start() creates everything; kb_broker_stop() frees
 * it. The config is borrowed and must outlive the broker.
 *
 * Threading: loop thread only.
 *
 * Errors: kb_broker_start() returns KP_ERR__IO / KP_ERR__INVAL with one line
 * in err naming the key, value and problem (a port in use, an unwritable
 * log dir).
 */
#ifndef KB_BROKER_H
#define KB_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_loop.h"
#include "kp_types.h"

typedef struct kb_topics kb_topics;
typedef struct kb_conn kb_conn;
typedef struct kb_server kb_server;
typedef struct kb_gcoord kb_gcoord;
typedef struct kb_tcoord kb_tcoord;
typedef struct kb_req kb_req;
typedef struct kb_plog kb_plog;
typedef struct kb_work kb_work;
typedef struct kb_fetch_waiters kb_fetch_waiters;
typedef struct kb_scram_store kb_scram_store;
typedef struct kb_dynconf kb_dynconf;
typedef struct kb_gconf kb_gconf;
typedef struct kb_quotas kb_quotas;
typedef struct kb_acl_store kb_acl_store;

typedef struct kb_broker {
    const kb_config *cfg;
    kb_loop *loop;
    kb_topics *topics;
    kb_server *server;
    kb_gcoord *gcoord; /* the group coordinator (kb_gcoord.h) */
    kb_tcoord *tcoord; /* the transaction coordinator (kb_tcoord.h) */
    kb_plog *plog;
    kb_work *work; /* helper threads for CPU-heavy work */
    kb_fetch_waiters *fetch_waiters;
    kb_scram_store *scram; /* SCRAM credentials (kb_scram_store.h) */
    kb_dynconf *dynconf; /* dynamic broker configs (kb_admin.h) */
    kb_gconf *gconf;     /* group configs (kb_gconf.h) */
    kb_quotas *quotas;   /* client quotas (kb_quota.h) */
    kb_acl_store *acl;   /* ACLs; NULL without an authorizer (kb_acl.h, kb_authz.h) */
    char cluster_id[64];
    int32_t node_id;
    int signal_fd;
    int64_t next_pid;      /* next producer id to hand out (kb_tcoord.h) */
    int64_t pid_block_end; /* first id past the durably reserved block */
} kb_broker;

kp_err kb_broker_start(kb_broker *b, const kb_config *cfg, char *err, size_t errlen);
/* Runs the loop until SIGTERM or SIGINT. */
kp_err kb_broker_run(kb_broker *b);
void kb_broker_stop(kb_broker *b);

/* The advertised host and port of the listener req came in on (Metadata,
 * FindCoordinator and DescribeCluster all answer with it). */
void kb_broker_advertised(kb_req *req, kp_str *host, int32_t *port);

#endif
