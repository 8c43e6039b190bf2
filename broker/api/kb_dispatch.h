/*
 * kb_dispatch: from a whole request frame to a handler call.
 *
 * Job: decode the request header and body with the generated codec, answer
 * a too-new ApiVersions with the KIP-511 v0 error response, close the
 * connection on anything Kafka would close it for (an unknown API key, an
 * unsupported version, a body that does not parse), and call the handler
 * named in kb_dispatch.def, with the request's pipeline policy (its quota
 * kind) from the same line. On a SASL listener, before authentication
 * completes, only APIs marked PRE_AUTH there, in the order kb_sasl_allows()
 * lets them through, are decoded; anything else closes the connection, as
 * Kafka's authenticator does.
 *
 * Invariants:
 *   1. Only APIs listed in kb_dispatch.def are advertised or served, at
 *      versions within both the handler's top version and the schema.
 *   2. Every dispatched request ends in exactly one kb_req_finish(), or in a
 *      closed connection.
 *
 * Ownership: the frame belongs to the connection; the request's arena holds
 * every decoded struct.
 * Threading: loop thread only.
 */
#ifndef KB_DISPATCH_H
#define KB_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_conn.h"
#include "kp_msg.h"

/* Declares every handler: kp_err kb_h_<name>(kb_req *, const kp_<name>_req *,
 * kp_<name>_resp *). A handler fills the response (pre-set to defaults) and
 * returns KP_ERR_NONE, or KB_PARKED to answer later. */
#define X(key, name, top, quota, auth, file) \
    kp_err kb_h_##name(kb_req *req, const kp_##name##_req *rq, kp_##name##_resp *rs);
#include "kb_dispatch.def"
#undef X

void kb_dispatch(kb_conn *c, const uint8_t *frame, size_t len);

/* After a SaslHandshake v0: one raw SASL token (a frame without Kafka
 * header), answered with a raw token or a closed connection (kb_h_sasl.c). */
void kb_h_sasl_raw(kb_conn *c, const uint8_t *token, size_t len);

/* The advertised version range of an API; false if not served. */
bool kb_dispatch_versions(int key, int16_t *min_version, int16_t *max_version);

#endif
