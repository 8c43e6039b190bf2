/*
 * kb_console_api: the web console's JSON API, as functions from a parsed
 * HTTP request to a response body, with no socket in sight.
 *
 * Routes (every answer is JSON; errors are {"error": "..."} with a 4xx/5xx):
 *   GET  /api/session                      the CSRF token, whether writes are on, the user
 *   GET  /api/cluster                      cluster id, controller, brokers, counts
 *   GET  /api/brokers                      this broker: id, listeners, version
 *   GET  /api/topics                       every topic: partitions, size, records
 *   GET  /api/topics/<t>                   partitions (leader, replicas, low/high
 *                                          watermarks, size) and effective configs
 *   GET  /api/topics/<t>/records?partition=P&offset=O|timestamp=T&max=N
 *                                          up to N (<= 100) records, 1 MiB read at most
 *   POST /api/topics/<t>/produce?partition=P&key=K   body: the value (write)
 *   GET  /api/groups                       classic and consumer groups, state, lag
 *   GET  /api/groups/<g>                   members, assignments, offsets and lag per
 *                                          partition, the lag history
 *   POST /api/groups/<g>/reset?to=earliest|latest|timestamp&timestamp=T[&topic=t]
 *                                          only while the group is empty (write)
 *
 * Invariants:
 *   1. Nothing here blocks the loop for long: a records read is bounded by
 *      KB_CONSOLE_READ_MAX bytes and KB_CONSOLE_RECORDS_MAX records; an answer
 *      by KB_CONSOLE_BODY_MAX bytes.
 *   2. The API never decides whether a write is allowed (kb_console_guard
 *      did, before); it applies the principal's ACLs to what it shows.
 *
 * Ownership: the response body is malloc()ed and the caller's.
 * Threading: loop thread only.
 */
#ifndef KB_CONSOLE_API_H
#define KB_CONSOLE_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_console_lag.h"

#define KB_CONSOLE_READ_MAX    (1 << 20)
#define KB_CONSOLE_RECORDS_MAX 100
#define KB_CONSOLE_BODY_MAX    (16 << 20)

typedef struct kb_console_req {
    const char *method;   /* "GET", "POST" */
    const char *path;     /* decoded, without the query */
    const char *query;    /* raw, without '?', or "" */
    const uint8_t *body;
    size_t body_len;
    const char *principal; /* "User:name", or NULL when no users are configured */
    const char *peer_host; /* the client's address, for ACLs */
} kb_console_req;

typedef struct kb_console_resp {
    int status;
    const char *content_type; /* static */
    char *body;               /* malloc()ed (or constant when body_static), or NULL */
    size_t body_len;
    bool body_static;         /* body is constant data (a page file): not freed */
} kb_console_resp;

typedef struct kb_console_api {
    kb_broker *b;
    kb_console_lag *lag;
    const char *csrf_token;
    bool write_enable;
} kb_console_api;

void kb_console_api_handle(const kb_console_api *api, const kb_console_req *rq,
                           kb_console_resp *out);

/* A JSON error answer. */
void kb_console_error(kb_console_resp *out, int status, const char *msg);

/* The value of name in an application/x-www-form-urlencoded query,
 * percent-decoded into buf (NUL-terminated); false when absent or longer
 * than cap - 1. */
bool kb_console_query(const char *query, const char *name, char *buf, size_t cap, size_t *len);

#endif
