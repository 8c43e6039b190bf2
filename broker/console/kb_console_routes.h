/*
 * kb_console_routes: the console API's route handlers, one family per file
 * (kb_console_topics.c, kb_console_groups.c), behind kb_console_api's router.
 *
 * Job: each handler reads the request, applies the principal's ACLs and
 * fills out with a JSON body (kb_console_send) or an error.
 * Ownership and threading as kb_console_api.h.
 */
#ifndef KB_CONSOLE_ROUTES_H
#define KB_CONSOLE_ROUTES_H

#include <stdbool.h>

#include "kb_console_api.h"
#include "kb_json.h"

/* Hands j's text to out with status 200, or a 500 when j failed. */
void kb_console_send(kb_json *j, kb_console_resp *out);
/* Whether the request's principal may perform op on the resource (always
 * true without users or without an authorizer). */
bool kb_console_allowed(const kb_console_api *api, const kb_console_req *rq, int8_t op,
                        int8_t res_type, const char *name);
/* Whether the named resource may be used for op: false with out filled,
 * 404 when it does not exist or the principal may not DESCRIBE it (so its
 * existence does not leak), 403 when op itself is refused. */
bool kb_console_gate(const kb_console_api *api, const kb_console_req *rq, int8_t res_type,
                     const char *name, bool exists, int8_t op, kb_console_resp *out);
/* A decimal integer query parameter; false when absent or malformed. */
bool kb_console_query_long(const char *query, const char *name, int64_t *out);

void kb_console_topics_list(const kb_console_api *api, const kb_console_req *rq,
                            kb_console_resp *out);
void kb_console_topic_show(const kb_console_api *api, const kb_console_req *rq, const char *topic,
                           kb_console_resp *out);
void kb_console_topic_records(const kb_console_api *api, const kb_console_req *rq,
                              const char *topic, kb_console_resp *out);
void kb_console_topic_produce(const kb_console_api *api, const kb_console_req *rq,
                              const char *topic, kb_console_resp *out);
void kb_console_groups_list(const kb_console_api *api, const kb_console_req *rq,
                            kb_console_resp *out);
void kb_console_group_show(const kb_console_api *api, const kb_console_req *rq, const char *group,
                           kb_console_resp *out);
void kb_console_group_reset(const kb_console_api *api, const kb_console_req *rq, const char *group,
                            kb_console_resp *out);

#endif
