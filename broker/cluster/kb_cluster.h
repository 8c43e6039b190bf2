/*
 * kb_cluster: this broker as a member of a cluster run by Apache Kafka's
 * KRaft controllers (process.roles=broker): it registers
 * (BrokerRegistration v4 with its listeners, rack, log dir ids, incarnation
 * id and supported features), heartbeats every broker.heartbeat.interval.ms
 * with its metadata offset (asking to stay fenced until it has caught up
 * with the metadata log), re-registers after a lost session, follows the
 * active controller through failovers, and follows __cluster_metadata
 * (kb_meta_fetch), handing each record to the apply hook.
 *
 * Invariants:
 *   1. Without process.roles=broker nothing here runs (kb_cluster_enabled).
 *   2. At most one registration or heartbeat in flight; a heartbeat
 *      unanswered for a whole session timeout counts as a lost controller.
 *   3. Unreachable controllers at start-up are retried with a backoff
 *      (200 ms doubling to 5 s), one log line per attempt, never a crash.
 *   4. INCONSISTENT_CLUSTER_ID or features the controller refuses stop the
 *      broker with one ERROR line (kb_cluster_failed then says so).
 *   5. Controlled shutdown (kb_cluster_begin_shutdown, on SIGTERM, as a
 *      Kafka 4 broker): while registered and unfenced, the heartbeats ask
 *      WantShutDown and the broker keeps serving and following the
 *      metadata (the controller moves its leaderships away and takes it
 *      out of the ISRs, and it becomes a follower of what it led) until a
 *      heartbeat answers ShouldShutDown, the session ends, or 5 minutes
 *      pass; then the loop stops.
 *   6. Every metadata record is applied to the image (kb_meta_image) before
 *      the apply hook hears it; a record of an unknown type or a newer
 *      version, or one that does not decode or names a topic the image
 *      lacks, stops the broker with one ERROR line naming the record, its
 *      type, version and offset (never a silent skip). The image's
 *      changes reach this broker's topics through kb_cluster_act.
 * Ownership: kb_cluster_start allocates, kb_cluster_stop frees; borrows the
 * broker and its config.
 * Threading: the loop's thread only.
 * Errors: kb_cluster_check fails the start with one line in err (roles,
 * quorum keys, meta.properties); later trouble is retried or fatal (4).
 */
#ifndef KB_CLUSTER_H
#define KB_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_forward.h"
#include "kb_interbroker.h"
#include "kb_meta_batches.h"
#include "kb_meta_image.h"

typedef struct kb_cluster kb_cluster;

bool kb_cluster_enabled(const kb_config *cfg);
/* Before the log dirs are opened: roles, quorum keys, meta.properties. */
kp_err kb_cluster_check(const kb_config *cfg, char *err, size_t errlen);
kp_err kb_cluster_start(kb_broker *b, kb_cluster **out, char *err, size_t errlen);
void kb_cluster_stop(kb_cluster *c);

/* Every metadata record, in offset order, after the image applied it; the
 * default counts and logs. */
void kb_cluster_set_apply(kb_cluster *c, kb_meta_record_fn *fn, void *arg);
/* The cluster as the metadata applied so far describes it (NULL for NULL);
 * valid until kb_cluster_stop. */
const kb_meta_image *kb_cluster_image(const kb_cluster *c);
/* Where admin requests go to the controller (kb_forward.h); NULL for c NULL. */
kb_forward *kb_cluster_forwarder(kb_cluster *c);
/* The inter-broker client (kb_interbroker.h); NULL for c NULL. */
kb_ib *kb_cluster_interbroker(kb_cluster *c);
/* SIGTERM in cluster mode: begins the controlled shutdown (invariant 5)
 * and returns true, the loop stopping later; false when there is none to
 * do (controlled.shutdown.enable=false, not registered or fenced, one
 * under way already), the caller then stops at once. */
bool kb_cluster_begin_shutdown(kb_cluster *c);
/* True after a fatal condition stopped the loop. */
bool kb_cluster_failed(const kb_cluster *c);

#endif
