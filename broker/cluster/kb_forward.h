/*
 * kb_forward: admin requests a Kafka 4 broker forwards to the active KRaft
 * controller (ForwardingManager): the client's request bytes, header
 * included, wrapped in an EnvelopeRequest (API 58) with the client's
 * principal (DefaultPrincipalData, version-prefixed, as Kafka's
 * DefaultKafkaPrincipalBuilder serializes it) and address; the
 * EnvelopeResponse carries the controller's response header and body, which
 * is decoded into the request's response and answered through the pipeline
 * (kb_req_finish), so the client sees the controller's answer.
 *
 * Forwarded (cluster mode only): CreateTopics, DeleteTopics,
 * CreatePartitions, AlterConfigs and IncrementalAlterConfigs (unless every
 * resource is a BROKER_LOGGER, which the broker handles itself),
 * CreateAcls, DeleteAcls, AlterUserScramCredentials, AlterClientQuotas,
 * ElectLeaders, AlterPartitionReassignments, UpdateFeatures,
 * UnregisterBroker. The controller authorizes them
 * with the client's principal.
 *
 * Invariants:
 *   1. Nothing waits: requests go out on one non-blocking connection to the
 *      quorum leader; at most KB_FORWARD_MAX_IN_FLIGHT are sent at a time,
 *      the others queue (at most KB_FORWARD_MAX_QUEUED in all, beyond that
 *      REQUEST_TIMED_OUT at once).
 *   2. A lost connection or an envelope NOT_CONTROLLER sends the request
 *      again (to the leader the quorum names next) until
 *      KB_FORWARD_TIMEOUT_MS after it arrived (Kafka's retryTimeoutMs), then
 *      the client gets the request's error response with REQUEST_TIMED_OUT.
 *   3. Envelope UNSUPPORTED_VERSION closes the client's connection; any
 *      other envelope error answers UNKNOWN_SERVER_ERROR (as Kafka's broker).
 *   4. At most one creation per topic name is in flight.
 *   5. Every forwarded request ends in exactly one kb_req_finish, or in its
 *      connection's close (on_cancel detaches it; a late answer is dropped).
 * Ownership: kb_forward_new borrows the loop, helper pool and quorum (the
 * cluster's, which outlive it); kb_forward_free detaches parked requests.
 * Threading: the loop's thread only.
 */
#ifndef KB_FORWARD_H
#define KB_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_quorum.h"
#include "kb_req.h"

#define KB_FORWARD_TIMEOUT_MS 60000
#define KB_FORWARD_MAX_IN_FLIGHT 16 /* kb_ctrl_conn's own bound */
#define KB_FORWARD_MAX_QUEUED 4096

typedef struct kb_forward kb_forward;

kb_forward *kb_forward_new(kb_loop *loop, kb_work *work, kb_quorum *q, int32_t node_id);
void kb_forward_free(kb_forward *f);

/* Whether a Kafka 4.4 broker forwards this decoded request. */
bool kb_forward_wants(int16_t api_key, const void *request);

/* Forwards req (frame: the client's request header and body, valid until
 * kb_req_finish) and answers it later; returns KB_PARKED. */
kp_err kb_forward_request(kb_forward *f, kb_req *req, const uint8_t *frame, size_t len);

/* A topic the broker itself asks the controller for, as Kafka's
 * AutoTopicCreationManager does: configs are key, value pairs ending with
 * a NULL key (at most KB_FORWARD_MAX_TOPIC_CONFIGS). */
#define KB_FORWARD_MAX_TOPIC_CONFIGS 8
typedef struct kb_forward_topic {
    const char *name;
    int32_t partitions;
    int16_t replication_factor;
    const char *const *configs;
} kb_forward_topic;

/* Sends a CreateTopics for t unless one for that name is in flight: in an
 * Envelope with the principal and header (client id, correlation id) of the
 * client's request ctx (a Metadata that auto-creates), or plainly as the
 * broker when ctx is NULL (the internal topics). The result is logged;
 * the topic reaches the broker as metadata records. */
void kb_forward_create_topic(kb_forward *f, const kb_forward_topic *t, const kb_req *ctx);

/* The principal "Type:Name" as Kafka's DefaultKafkaPrincipalBuilder
 * serializes it: an int16 version (0), then DefaultPrincipalData v0 with
 * TokenAuthenticated false. Returns the length, 0 when it does not fit. */
size_t kb_forward_principal(const char *principal, uint8_t *out, size_t cap);

/* Requests forwarded and not yet answered (queued or sent). */
size_t kb_forward_pending(const kb_forward *f);

#endif
