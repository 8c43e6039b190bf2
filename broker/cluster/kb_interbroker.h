/*
 * kb_interbroker: this broker as a client of the other brokers and of the
 * active controller, for the transaction protocol of cluster mode: one
 * connection per peer broker on its inter.broker.listener.name endpoint
 * (the metadata image's registration), over which the transaction
 * coordinator sends WriteTxnMarkers and a partition leader sends
 * AddPartitionsToTxn v4+ (verification, and at transaction version 2 the
 * implicit add) to the coordinator of a transactional id; and
 * AllocateProducerIds to the active controller for blocks of producer ids.
 * It installs the cluster hooks (kb_context.h) the transaction coordinator,
 * a floor below, calls.
 *
 * Invariants:
 *   1. Nothing blocks: every request goes out on a kb_ctrl_conn; each one
 *      sent gets exactly one callback.
 *   2. A peer's connection is reopened when it failed or the peer's
 *      registered endpoint changed.
 *   3. At most one AllocateProducerIds is in flight.
 * Ownership: kb_ib_new borrows the broker, the quorum and the metadata
 * image (which outlive it); kb_ib_free closes every connection without
 * running callbacks.
 * Threading: the loop's thread only.
 * Errors: KP_ERR__INVAL (no endpoint, queue full), KP_ERR__NOMEM; hook
 * callbacks get Kafka wire codes (NETWORK_EXCEPTION for a lost
 * connection).
 */
#ifndef KB_INTERBROKER_H
#define KB_INTERBROKER_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_ctrl_conn.h"
#include "kb_meta_image.h"
#include "kb_quorum.h"

#define KB_IB_MAX_PEERS 64

typedef struct kb_ib kb_ib;

kb_ib *kb_ib_new(kb_broker *b, kb_quorum *q, const kb_meta_image *img,
                 int64_t (*broker_epoch)(void *), void *epoch_arg);
void kb_ib_free(kb_ib *ib);

/* Sends one request to broker node: KP_ERR_NONE and cb runs later (body
 * NULL when the connection failed), or an error and cb never runs
 * (KP_ERR__INVAL: no endpoint known for node, or too many in flight). */
kp_err kb_ib_send(kb_ib *ib, int32_t node, int16_t api_key, int16_t version,
                  kb_ctrl_encode_fn *enc, const void *msg, kb_ctrl_resp_fn *cb, void *arg);

#endif
