/*
 * kb_forward_errors: the response a Kafka broker gives a forwarded request
 * that the controller did not answer (getErrorResponse of the request): the
 * request's items echoed, each with one error code.
 *
 * Invariants:
 *   1. Only the APIs kb_forward forwards are known; for the others
 *      kb_forward_fill_error returns false and leaves rs as it was.
 *   2. Messages: UNKNOWN_SERVER_ERROR carries Kafka's text for it, every
 *      other code a null message (Kafka's exceptions here have none).
 * Ownership: arrays and strings are allocated in the request's arena.
 * Threading: the loop's thread only.
 */
#ifndef KB_FORWARD_ERRORS_H
#define KB_FORWARD_ERRORS_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_req.h"

/* Fills req->response (already at its defaults) for req->request with code. */
bool kb_forward_fill_error(kb_req *req, int16_t code);

#endif
