/*
 * kb_broker: the top of the house: starts every subsystem of the broker's
 * context (kb_context.h) in order, runs the loop, stops them in reverse.
 *
 * Invariants: a subsystem starts only after every subsystem it uses; the
 * request entry point (kb_dispatch) is wired into the context before the
 * listeners open.
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
#include "kb_context.h"
#include "kp_types.h"

kp_err kb_broker_start(kb_broker *b, const kb_config *cfg, char *err, size_t errlen);
/* Runs the loop until SIGTERM or SIGINT; KP_ERR__INVAL when cluster mode
 * stopped it for a fatal condition (already logged, e.g. a wrong cluster id). */
kp_err kb_broker_run(kb_broker *b);
void kb_broker_stop(kb_broker *b);


#endif
