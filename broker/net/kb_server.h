/*
 * kb_server: the listening sockets and the set of open connections.
 *
 * Job: bind every configured listener, accept connections, close idle ones
 * (connections.max.idle.ms), and free closed ones after each event batch.
 *
 * Invariants:
 *   1. Every open connection is on the live list exactly once; a closing one
 *      moves to the dead list and is freed in the before-sleep hook.
 *   2. The bound port of each listener is known after kb_server_start()
 *      (a configured port 0 gets an ephemeral one).
 *
 * Ownership: the server owns listeners and connections.
 * Threading: loop thread only.
 * Errors: kb_server_start() fails with KP_ERR__IO and a one-line message
 * naming the listener when a socket cannot be bound.
 */
#ifndef KB_SERVER_H
#define KB_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_context.h"
#include "kb_conn.h"

kp_err kb_server_start(kb_broker *b, kb_server **out, char *err, size_t errlen);
void kb_server_stop(kb_server *srv);
/* Moves a closing connection to the dead list. */
void kb_server_retire(kb_server *srv, kb_conn *c);
/* Serves an already connected non-blocking socket as if accepted on the
 * listener at listener_index (a socketpair() in the unit tests); takes fd.
 * NULL (fd closed) on failure. */
kb_conn *kb_server_adopt(kb_server *srv, size_t listener_index, int fd, const char *peer);
/* The open connections accepted on a listener (index into cfg->listeners). */
size_t kb_server_conn_count(const kb_server *srv, size_t listener_index);
/* The port a listener is bound to (index into cfg->listeners). */
uint16_t kb_server_port(const kb_server *srv, size_t listener_index);

/* The advertised host and port of the listener req came in on (Metadata,
 * FindCoordinator and DescribeCluster all answer with it); with
 * runnel.advertise.dialled.address, the address and port the client's
 * connection reached instead (a single node behind Docker networking). */
void kb_server_advertised(kb_req *req, kp_str *host, int32_t *port);

#endif
