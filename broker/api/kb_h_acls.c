/* Handlers for the ACL APIs: DescribeAcls, CreateAcls, DeleteAcls.
 *
 * Without an authorizer they answer SECURITY_DISABLED with Kafka 4.1's
 * messages; with one they read and change the store (kb_acl.h) after a
 * CLUSTER DESCRIBE / ALTER check, and persist every change before
 * answering. */
#include <stdlib.h>
#include <string.h>

#include "kb_acl.h"
#include "kb_authz.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_log.h"

#define NO_AUTHORIZER "No Authorizer is configured."
#define TOO_LARGE     "Unable to perform excessively large batch operation."

/* Kafka's message names the whole request ("Request Request(...) is not
 * authorized."); Runnel answers with the error's own description. */
static kp_str not_authorized(void)
{
    return kb_cstr(kb_authz_message(KP_ERR_CLUSTER_AUTHORIZATION_FAILED));
}

/* A copy of s in the request's arena (the store's strings do not live as
 * long as the response). */
static kp_str arena_str(kb_req *req, kp_str s)
{
    if (s.len < 0)
        return KP_STR_NULL;
    char *p = kp_arena_strdup(&req->arena, s.len > 0 ? s.p : "", (size_t)s.len);
    return p != NULL ? (kp_str){p, s.len} : (kp_str){"", 0};
}

/* ---- DescribeAcls ------------------------------------------------------------ */

static int cmp_resource(const void *a, const void *b, void *arg)
{
    const kb_acl_store *st = arg;
    kb_acl_binding x, y;
    kb_acl_at(st, *(const size_t *)a, &x);
    kb_acl_at(st, *(const size_t *)b, &y);
    if (x.ab_res_type != y.ab_res_type)
        return x.ab_res_type - y.ab_res_type;
    if (x.ab_pattern != y.ab_pattern)
        return x.ab_pattern - y.ab_pattern;
    int32_t min = x.ab_name.len < y.ab_name.len ? x.ab_name.len : y.ab_name.len;
    int c = min > 0 ? memcmp(x.ab_name.p, y.ab_name.p, (size_t)min) : 0;
    if (c != 0)
        return c;
    return x.ab_name.len < y.ab_name.len ? -1 : x.ab_name.len > y.ab_name.len ? 1 : 0;
}

/* Groups the matching bindings (indices sorted by resource) as Kafka does:
 * one resource entry per pattern, its ACLs under it. */
static kp_err describe_fill(kb_req *req, const kb_acl_store *st, const size_t *idx, size_t n,
                            kp_describe_acls_resp *rs)
{
    size_t groups = 0;
    for (size_t i = 0; i < n; i++)
        groups += i == 0 || cmp_resource(&idx[i - 1], &idx[i], (void *)(uintptr_t)st) != 0;
    if (!KB_ARRAY_ALLOC(req, rs->resources, groups))
        return KP_ERR__NOMEM;
    size_t g = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && cmp_resource(&idx[i], &idx[j], (void *)(uintptr_t)st) == 0)
            j++;
        kp_describe_acls_resp_describe_acls_resource *r = &rs->resources.v[g++];
        kb_acl_binding b;
        kb_acl_at(st, idx[i], &b);
        r->resource_type = b.ab_res_type;
        r->resource_name = arena_str(req, b.ab_name);
        r->pattern_type = b.ab_pattern;
        if (!KB_ARRAY_ALLOC(req, r->acls, j - i))
            return KP_ERR__NOMEM;
        for (size_t k = i; k < j; k++) {
            kp_describe_acls_resp_acl_description *d = &r->acls.v[k - i];
            kb_acl_at(st, idx[k], &b);
            d->principal = arena_str(req, b.ab_principal);
            d->host = arena_str(req, b.ab_host);
            d->operation = b.ab_op;
            d->permission_type = b.ab_perm;
        }
        i = j;
    }
    return KP_ERR_NONE;
}

kp_err kb_h_describe_acls(kb_req *req, const kp_describe_acls_req *rq, kp_describe_acls_resp *rs)
{
    kb_acl_binding f = {rq->resource_type_filter, rq->pattern_type_filter, rq->operation,
                        rq->permission_type,      rq->resource_name_filter, rq->principal_filter,
                        rq->host_filter};
    /* Kafka refuses to parse a filter with an UNKNOWN (0) code: closed. */
    if (!kb_acl_codes_known(&f))
        return KP_ERR__MALFORMED;
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = not_authorized();
        return KP_ERR_NONE;
    }
    const kb_acl_store *st = req->broker->acl;
    if (st == NULL) {
        rs->error_code = KP_ERR_SECURITY_DISABLED;
        rs->error_message = KP_STR_LIT("No Authorizer is configured on the broker");
        return KP_ERR_NONE;
    }
    size_t total = kb_acl_count(st), n = 0;
    size_t *idx = kp_arena_alloc(&req->arena, (total + 1) * sizeof(*idx));
    if (idx == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < total; i++) {
        kb_acl_binding b;
        kb_acl_at(st, i, &b);
        if (kb_acl_filter_matches(&f, &b))
            idx[n++] = i;
    }
    qsort_r(idx, n, sizeof(*idx), cmp_resource, (void *)(uintptr_t)st);
    return describe_fill(req, st, idx, n, rs);
}

/* ---- CreateAcls ------------------------------------------------------------------ */

/* Every result gets the same error (Kafka's getErrorResponse). */
static void create_fail_all(kp_create_acls_resp *rs, int16_t code, kp_str msg)
{
    for (int32_t i = 0; i < rs->results.n; i++) {
        rs->results.v[i].error_code = code;
        rs->results.v[i].error_message = msg;
    }
}

/* After a change: writes the store, or turns every success into an error
 * (the change stays in memory until the next successful write). */
static bool persist(kb_req *req)
{
    kp_err e = kb_acl_save(req->broker->acl);
    if (e == KP_ERR_NONE)
        return true;
    KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"cannot write the ACL file\" error=%s",
           kp_err_name(e));
    return false;
}

static kb_acl_binding creation_of(const kp_create_acls_req_acl_creation *c)
{
    return (kb_acl_binding){c->resource_type,   c->resource_pattern_type, c->operation,
                            c->permission_type, c->resource_name,         c->principal,
                            c->host};
}

kp_err kb_h_create_acls(kb_req *req, const kp_create_acls_req *rq, kp_create_acls_resp *rs)
{
    bool buildable = true;
    for (int32_t i = 0; i < rq->creations.n; i++) {
        kb_acl_binding b = creation_of(&rq->creations.v[i]);
        if (!kb_acl_codes_known(&b))
            return KP_ERR__MALFORMED; /* Kafka closes the connection */
        buildable = buildable && kb_acl_buildable(&b);
    }
    if (!KB_ARRAY_ALLOC(req, rs->results, rq->creations.n))
        return KP_ERR__NOMEM;
    if (!kb_authz_cluster(req, KB_OP_ALTER)) {
        create_fail_all(rs, KP_ERR_CLUSTER_AUTHORIZATION_FAILED, not_authorized());
        return KP_ERR_NONE;
    }
    if (!kb_authz_on(req)) {
        create_fail_all(rs, KP_ERR_SECURITY_DISABLED, KP_STR_LIT(NO_AUTHORIZER));
        return KP_ERR_NONE;
    }
    if (!buildable) {
        create_fail_all(rs, KP_ERR_UNKNOWN_SERVER_ERROR, KP_STR_NULL);
        return KP_ERR_NONE;
    }
    if (rq->creations.n > KB_ACL_REQUEST_MAX) {
        create_fail_all(rs, KP_ERR_POLICY_VIOLATION, KP_STR_LIT(TOO_LARGE));
        return KP_ERR_NONE;
    }
    bool changed = false;
    for (int32_t i = 0; i < rq->creations.n; i++) {
        kp_create_acls_resp_acl_creation_result *r = &rs->results.v[i];
        kb_acl_binding b = creation_of(&rq->creations.v[i]);
        kb_msgbuf msg;
        kp_err e = kb_acl_check_new(&b, &msg);
        if (e == KP_ERR_NONE) {
            e = kb_acl_add(req->broker->acl, &b);
            snprintf(msg.text, sizeof msg.text, "%s",
                     e == KP_ERR_POLICY_VIOLATION ? TOO_LARGE : "Unable to store the ACL");
        }
        if (e != KP_ERR_NONE) {
            r->error_code = (int16_t)kp_err_to_wire(e);
            r->error_message = kb_req_str(req, msg.text);
        } else {
            changed = true;
        }
    }
    if (changed && !persist(req))
        for (int32_t i = 0; i < rs->results.n; i++)
            if (rs->results.v[i].error_code == KP_ERR_NONE)
                rs->results.v[i].error_code = KP_ERR_KAFKA_STORAGE_ERROR;
    return KP_ERR_NONE;
}

/* ---- DeleteAcls ------------------------------------------------------------------ */

typedef kp_delete_acls_resp_delete_acls_filter_result filter_result;

static kb_acl_binding filter_of(const kp_delete_acls_req_delete_acls_filter *f)
{
    return (kb_acl_binding){f->resource_type_filter, f->pattern_type_filter, f->operation,
                            f->permission_type,      f->resource_name_filter,
                            f->principal_filter,     f->host_filter};
}

/* Lists what filter f matches in the store as it was before the request
 * (Kafka matches every filter against the same snapshot). */
static kp_err list_matches(kb_req *req, const kb_acl_binding *f, filter_result *r)
{
    const kb_acl_store *st = req->broker->acl;
    size_t n = 0, total = kb_acl_count(st);
    kb_acl_binding b;
    for (size_t i = 0; i < total; i++) {
        kb_acl_at(st, i, &b);
        n += kb_acl_filter_matches(f, &b);
    }
    if (!KB_ARRAY_ALLOC(req, r->matching_acls, n))
        return KP_ERR__NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < total && k < n; i++) {
        kb_acl_at(st, i, &b);
        if (!kb_acl_filter_matches(f, &b))
            continue;
        kp_delete_acls_resp_delete_acls_matching_acl *m = &r->matching_acls.v[k++];
        kp_delete_acls_resp_delete_acls_matching_acl_defaults(m);
        m->error_message = KP_STR_NULL; /* Kafka: ApiError.NONE's null message */
        m->resource_type = b.ab_res_type;
        m->resource_name = arena_str(req, b.ab_name);
        m->pattern_type = b.ab_pattern;
        m->principal = arena_str(req, b.ab_principal);
        m->host = arena_str(req, b.ab_host);
        m->operation = b.ab_op;
        m->permission_type = b.ab_perm;
    }
    return KP_ERR_NONE;
}

static void delete_fail_all(kp_delete_acls_resp *rs, int16_t code, kp_str msg)
{
    for (int32_t i = 0; i < rs->filter_results.n; i++) {
        rs->filter_results.v[i].error_code = code;
        rs->filter_results.v[i].error_message = msg;
    }
}

kp_err kb_h_delete_acls(kb_req *req, const kp_delete_acls_req *rq, kp_delete_acls_resp *rs)
{
    for (int32_t i = 0; i < rq->filters.n; i++) {
        kb_acl_binding f = filter_of(&rq->filters.v[i]);
        if (!kb_acl_codes_known(&f))
            return KP_ERR__MALFORMED; /* Kafka closes the connection */
    }
    if (!KB_ARRAY_ALLOC(req, rs->filter_results, rq->filters.n))
        return KP_ERR__NOMEM;
    if (!kb_authz_cluster(req, KB_OP_ALTER)) {
        delete_fail_all(rs, KP_ERR_CLUSTER_AUTHORIZATION_FAILED, not_authorized());
        return KP_ERR_NONE;
    }
    if (!kb_authz_on(req)) {
        delete_fail_all(rs, KP_ERR_SECURITY_DISABLED, KP_STR_LIT(NO_AUTHORIZER));
        return KP_ERR_NONE;
    }
    size_t removing = 0;
    for (int32_t i = 0; i < rq->filters.n; i++) {
        filter_result *r = &rs->filter_results.v[i];
        r->error_message = KP_STR_NULL;
        kb_acl_binding f = filter_of(&rq->filters.v[i]);
        kb_msgbuf msg;
        kp_err e = kb_acl_check_filter(&f, &msg);
        if (e != KP_ERR_NONE) {
            r->error_code = (int16_t)e;
            r->error_message = kb_req_str(req, msg.text);
            continue;
        }
        if ((e = list_matches(req, &f, r)) != KP_ERR_NONE)
            return e;
        removing += (size_t)r->matching_acls.n;
        if (removing > KB_ACL_REQUEST_MAX) {
            /* Kafka's bound on records per operation; nothing of this
             * filter is removed. */
            r->matching_acls.n = 0;
            r->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
        }
    }
    size_t removed = 0;
    for (int32_t i = 0; i < rq->filters.n; i++) {
        kb_acl_binding f = filter_of(&rq->filters.v[i]);
        if (rs->filter_results.v[i].error_code == KP_ERR_NONE)
            removed += kb_acl_delete(req->broker->acl, &f, NULL, NULL);
    }
    if (removed > 0 && !persist(req))
        delete_fail_all(rs, KP_ERR_KAFKA_STORAGE_ERROR, KP_STR_NULL);
    return KP_ERR_NONE;
}
