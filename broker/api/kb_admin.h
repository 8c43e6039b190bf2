/*
 * kb_admin: the state behind the administration APIs that is not the topic
 * registry (dynamic broker configs, group configs, client quotas), started and stopped
 * with the broker, and the few helpers the admin handlers share.
 *
 * Invariants:
 *   1. After kb_admin_start() succeeds, b->dynconf, b->gconf and b->quotas
 *      are set and every topic resolves its defaults through b->dynconf.
 *
 * Ownership: the broker owns them; kb_admin_stop() frees them.
 * Threading: loop thread only.
 * Errors: kb_admin_start() returns KP_ERR__IO / __CORRUPT / __NOMEM with a
 * line in err naming the file.
 */
#ifndef KB_ADMIN_H
#define KB_ADMIN_H

#include <stdbool.h>
#include <stddef.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_quota.h"
#include "kb_req.h"

kp_err kb_admin_start(kb_broker *b, char *err, size_t errlen);
void kb_admin_stop(kb_broker *b);

/* The first log dir (where the registry and the admin files live). */
const char *kb_admin_dir(const kb_broker *b);

/* True if a BROKER resource name designates this node: "" (cluster
 * default, when allow_default) or the node id in decimal. */
bool kb_admin_is_self(const kb_req *req, kp_str name, bool allow_default);

/* Re-applies every topic's effective config to its open logs (after a
 * dynamic broker config changed). */
void kb_admin_configs_changed(kb_broker *b);

#endif
