/*
 * kb_quorum: the controllers this broker knows (from controller.quorum.voters
 * or controller.quorum.bootstrap.servers) and which of them leads the KRaft
 * quorum, as Fetch responses announce it.
 *
 * Invariants:
 *   1. n >= 1 after kb_quorum_parse succeeded; a node's id is -1 when only
 *      its address is known (bootstrap servers).
 *   2. leader_epoch only grows; kb_quorum_learn with an older epoch is
 *      ignored. leader < 0 while no leader is known.
 * Ownership: the kb_quorum owns its node array (kb_quorum_fini).
 * Threading: the loop's thread only.
 * Errors: KP_ERR__INVAL with one line in err for a malformed entry or
 * neither key set; KP_ERR__NOMEM.
 */
#ifndef KB_QUORUM_H
#define KB_QUORUM_H

#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kp_err.h"

/* Leaders learned from responses beyond the configured nodes stop here (a
 * hostile controller cannot grow the list without bound). */
#define KB_QUORUM_MAX_NODES 64

typedef struct kb_ctrl_node {
    int32_t id; /* -1: a bootstrap address */
    char host[256];
    uint16_t port;
} kb_ctrl_node;

typedef struct kb_quorum {
    kb_ctrl_node *v;
    size_t n, cap;
    int leader;          /* index into v, -1: unknown */
    int32_t leader_epoch;
    size_t rotate;       /* the next node to try while no leader is known */
} kb_quorum;

kp_err kb_quorum_parse(const kb_config *cfg, kb_quorum *q, char *err, size_t errlen);
void kb_quorum_fini(kb_quorum *q);
/* The index of the leader if known, else of the next node in turn. Nodes
 * are named by index: kb_quorum_learn may move the array. */
int kb_quorum_pick(kb_quorum *q);
/* A Fetch response named leader id at epoch, at host:port if given (host
 * NULL: look it up among the voters). Returns true when the leader changed. */
bool kb_quorum_learn(kb_quorum *q, int32_t id, int32_t epoch, const char *host, int32_t port);
/* The node in use failed: forget the leader so the next pick rotates. */
void kb_quorum_forget_leader(kb_quorum *q);
/* "host:port" of node i, "none" for -1, for log lines. */
const char *kb_quorum_addr(const kb_quorum *q, int i, char *buf, size_t len);

#endif
