/*
 * kb_console_http: the console's HTTP listener, on broker/http's server:
 * binds runnel.console.listener, turns each parsed request into a
 * kb_console_http_req for kb_console_handle and sends the answer.
 *
 * Invariants: c->port is the bound port once kb_console_serve_start
 * returned KP_ERR_NONE. Ownership: the listener is c->server's.
 * Threading: loop thread only.
 */
#ifndef KB_CONSOLE_HTTP_H
#define KB_CONSOLE_HTTP_H

#include <stddef.h>

#include "kb_console.h"

kp_err kb_console_serve_start(kb_console *c, char *err, size_t errlen);
void kb_console_serve_stop(kb_console *c);

#endif
