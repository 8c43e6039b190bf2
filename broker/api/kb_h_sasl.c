/*
 * Handlers of the security family: SaslHandshake (v0, v1), SaslAuthenticate
 * (v0-2), the raw token exchange that follows a v0 handshake, and
 * DescribeUserScramCredentials / AlterUserScramCredentials.
 *
 * Kafka's behaviour, followed here:
 *   - On a listener without SASL, or once authenticated, SaslHandshake and
 *     SaslAuthenticate answer ILLEGAL_SASL_STATE and the connection stays.
 *   - An unsupported mechanism answers UNSUPPORTED_SASL_MECHANISM with the
 *     enabled list, then the connection closes.
 *   - A failed authentication answers SASL_AUTHENTICATION_FAILED with the
 *     reason, is logged once with the peer address, and the connection
 *     closes. After a v0 handshake (no Kafka framing for errors) the
 *     connection just closes.
 *   - session_lifetime_ms is 0: no re-authentication (KIP-368) is asked.
 *   - AlterUserScramCredentials answers once per user named; any error for
 *     a user (empty name, unknown mechanism, the same user and mechanism
 *     twice, iterations outside 4096..16384, a bad salt or salted password,
 *     deleting what does not exist) leaves all of that user's changes out.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_authz.h"
#include "kb_config.h"
#include "kb_context.h"
#include "kb_dispatch.h"
#include "kb_log.h"
#include "kb_sasl.h"
#include "kb_scram_store.h"

static void log_auth_failure(const kb_conn *c)
{
    char user[KB_LOG_ESC_SHORT];
    const char *name = kb_sasl_session_user(c->sasl);
    KB_LOG(KB_LL_WARN, KB_SUB_NET,
           "msg=\"SASL authentication failed; closing\" conn=%llu peer=%s listener=%s "
           "mechanism=%s user=\"%s\" why=\"%s\"",
           (unsigned long long)c->id, c->peer, c->listener->li_name,
           kb_sasl_mech_name(kb_sasl_session_mech(c->sasl)),
           kb_log_escape(user, sizeof user, name, strlen(name)), kb_sasl_session_why(c->sasl));
}

static void authenticated(kb_conn *c)
{
    snprintf(c->principal, sizeof(c->principal), "User:%s", kb_sasl_session_user(c->sasl));
    c->sasl_phase = KB_SASL_DONE;
    KB_LOG(KB_LL_DEBUG, KB_SUB_NET,
           "msg=\"SASL authenticated\" conn=%llu peer=%s mechanism=%s principal=\"%s\"",
           (unsigned long long)c->id, c->peer, kb_sasl_mech_name(kb_sasl_session_mech(c->sasl)),
           c->principal);
    kb_sasl_session_free(c->sasl);
    c->sasl = NULL;
}

static bool fill_mechanisms(kb_req *req, const kb_sasl_listener *sl, kp_sasl_handshake_resp *rs)
{
    static const unsigned order[] = {KB_MECH_PLAIN, KB_MECH_SCRAM_SHA_256, KB_MECH_SCRAM_SHA_512};
    int32_t n = 0;
    if (!KB_ARRAY_ALLOC(req, rs->mechanisms, 3))
        return false;
    for (size_t i = 0; i < 3; i++)
        if (sl->sl_mechs & order[i])
            rs->mechanisms.v[n++] = kp_str_from(kb_sasl_mech_name(order[i]));
    rs->mechanisms.n = n;
    return true;
}

kp_err kb_h_sasl_handshake(kb_req *req, const kp_sasl_handshake_req *rq,
                           kp_sasl_handshake_resp *rs)
{
    kb_conn *c = req->conn;
    const kb_sasl_listener *sl = c->sasl_cfg;
    if (sl == NULL || c->sasl_phase != KB_SASL_START) {
        rs->error_code = KP_ERR_ILLEGAL_SASL_STATE;
        return KP_ERR_NONE;
    }
    if (!fill_mechanisms(req, sl, rs))
        return KP_ERR__NOMEM;
    unsigned m = rq->mechanism.len > 0
                     ? kb_sasl_mech_from_name(rq->mechanism.p, (size_t)rq->mechanism.len)
                     : 0;
    if (m == 0 || !(sl->sl_mechs & m)) {
        char esc[KB_LOG_ESC_SHORT];
        KB_LOG(KB_LL_WARN, KB_SUB_NET,
               "msg=\"unsupported SASL mechanism; closing\" conn=%llu peer=%s mechanism=\"%s\"",
               (unsigned long long)c->id, c->peer,
               kb_log_escape(esc, sizeof esc, rq->mechanism.p,
                             rq->mechanism.len > 0 ? (size_t)rq->mechanism.len : 0));
        rs->error_code = KP_ERR_UNSUPPORTED_SASL_MECHANISM;
        kb_conn_close_after_send(c, "unsupported SASL mechanism");
        return KP_ERR_NONE;
    }
    c->sasl = kb_sasl_session_new(m, sl, req->broker->scram);
    if (c->sasl == NULL)
        return KP_ERR__NOMEM;
    c->sasl_phase = req->api_version == 0 ? KB_SASL_RAW : KB_SASL_AUTH;
    return KP_ERR_NONE;
}

kp_err kb_h_sasl_authenticate(kb_req *req, const kp_sasl_authenticate_req *rq,
                              kp_sasl_authenticate_resp *rs)
{
    kb_conn *c = req->conn;
    if (c->sasl_phase != KB_SASL_AUTH || c->sasl == NULL) {
        rs->error_code = KP_ERR_ILLEGAL_SASL_STATE;
        rs->error_message = kp_str_from(c->sasl_cfg == NULL
                                            ? "SaslAuthenticate on a listener without SASL"
                                            : "SaslAuthenticate request received after "
                                              "successful authentication");
        return KP_ERR_NONE;
    }
    const uint8_t *out = NULL;
    size_t out_len = 0;
    size_t in_len = rq->auth_bytes.len > 0 ? (size_t)rq->auth_bytes.len : 0;
    kb_auth_step r = kb_sasl_session_step(c->sasl, rq->auth_bytes.p, in_len, &out, &out_len);
    if (r == KB_AUTH_FAILURE) {
        log_auth_failure(c);
        rs->error_code = KP_ERR_SASL_AUTHENTICATION_FAILED;
        rs->error_message = kb_req_str(req, kb_sasl_session_why(c->sasl));
        kb_conn_close_after_send(c, "SASL authentication failed");
        return KP_ERR_NONE;
    }
    uint8_t *copy = kp_arena_alloc(&req->arena, out_len + 1);
    if (copy == NULL)
        return KP_ERR__NOMEM;
    if (out_len > 0)
        memcpy(copy, out, out_len);
    rs->auth_bytes = (kp_slice){copy, (int32_t)out_len};
    if (r == KB_AUTH_SUCCESS)
        authenticated(c);
    return KP_ERR_NONE;
}

void kb_h_sasl_raw(kb_conn *c, const uint8_t *token, size_t len)
{
    const uint8_t *out = NULL;
    size_t out_len = 0;
    kb_auth_step r = kb_sasl_session_step(c->sasl, token, len, &out, &out_len);
    if (r == KB_AUTH_FAILURE) {
        log_auth_failure(c);
        kb_conn_close(c, "SASL authentication failed");
        return;
    }
    kb_out *o = calloc(1, sizeof(*o));
    uint8_t *mem = malloc(4 + out_len);
    if (o == NULL || mem == NULL) {
        free(o);
        free(mem);
        kb_conn_close(c, "out of memory");
        return;
    }
    mem[0] = (uint8_t)(out_len >> 24);
    mem[1] = (uint8_t)(out_len >> 16);
    mem[2] = (uint8_t)(out_len >> 8);
    mem[3] = (uint8_t)out_len;
    if (out_len > 0)
        memcpy(mem + 4, out, out_len);
    o->mem = mem;
    o->mem_len = o->total = 4 + out_len;
    if (r == KB_AUTH_SUCCESS)
        authenticated(c);
    kb_conn_send(c, o);
    kb_conn_request_done(c, 0);
}

/* ---- DescribeUserScramCredentials --------------------------------------------- */

static bool str_eq(kp_str a, kp_str b)
{
    return a.len == b.len && (a.len <= 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}

/* Fills one user's result with every mechanism stored for it. */
static bool describe_user(kb_req *req, kp_str user,
                          kp_describe_user_scram_credentials_resp_describe_user_scram_credentials_result *res)
{
    const kb_scram_store *st = req->broker->scram;
    static const kb_scram_mech mechs[] = {KB_SCRAM_SHA_256, KB_SCRAM_SHA_512};
    res->user = user;
    if (!KB_ARRAY_ALLOC(req, res->credential_infos, 2))
        return false;
    int32_t n = 0;
    for (size_t i = 0; i < 2; i++) {
        const kb_scram_cred *cr =
            user.len > 0 ? kb_scram_store_find(st, user.p, (size_t)user.len, mechs[i]) : NULL;
        if (cr == NULL)
            continue;
        res->credential_infos.v[n].mechanism = (int8_t)mechs[i];
        res->credential_infos.v[n++].iterations = cr->sc_iterations;
    }
    res->credential_infos.n = n;
    if (n == 0) {
        res->error_code = KP_ERR_RESOURCE_NOT_FOUND;
        res->error_message = kb_req_str(
            req, kp_arena_printf(&req->arena, "Attempt to describe a user credential that does "
                                              "not exist: %.*s",
                                 user.len > 0 ? (int)user.len : 0, user.p ? user.p : ""));
    }
    return true;
}

/* Every user with a credential, once each (the store is sorted by user). */
static bool describe_all(kb_req *req, kp_describe_user_scram_credentials_resp *rs)
{
    const kb_scram_store *st = req->broker->scram;
    size_t n = kb_scram_store_count(st);
    if (!KB_ARRAY_ALLOC(req, rs->results, n))
        return false;
    int32_t out = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < n; i++) {
        const char *user;
        (void)kb_scram_store_at(st, i, &user);
        if (prev != NULL && strcmp(prev, user) == 0)
            continue;
        prev = user;
        kp_str name = kb_req_str(req, user);
        if (name.p == NULL || !describe_user(req, name, &rs->results.v[out++]))
            return false;
    }
    rs->results.n = out;
    return true;
}

kp_err kb_h_describe_user_scram_credentials(kb_req *req,
                                            const kp_describe_user_scram_credentials_req *rq,
                                            kp_describe_user_scram_credentials_resp *rs)
{
    if (!kb_authz_cluster(req, KB_OP_DESCRIBE)) {
        rs->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
        rs->error_message = kb_cstr(kb_authz_message(rs->error_code));
        return KB_ARRAY_ALLOC(req, rs->results, 0) ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    if (rq->users.n <= 0) /* null or empty: every user, as Kafka */
        return describe_all(req, rs) ? KP_ERR_NONE : KP_ERR__NOMEM;
    if (!KB_ARRAY_ALLOC(req, rs->results, rq->users.n))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < rq->users.n; i++) {
        kp_str user = rq->users.v[i].name;
        bool dup = false;
        for (int32_t j = 0; j < rq->users.n && !dup; j++)
            dup = j != i && str_eq(rq->users.v[j].name, user);
        if (dup) {
            rs->results.v[i].user = user;
            rs->results.v[i].error_code = KP_ERR_DUPLICATE_RESOURCE;
            rs->results.v[i].error_message =
                kp_str_from("Cannot describe SCRAM credentials for the same user twice in a "
                            "single request");
        } else if (!describe_user(req, user, &rs->results.v[i])) {
            return KP_ERR__NOMEM;
        }
    }
    return KP_ERR_NONE;
}

/* ---- AlterUserScramCredentials ------------------------------------------------ */

typedef struct alter_entry {
    kp_str name;
    int8_t mech;
    size_t index; /* in the request: deletions first, then upsertions */
    const kp_alter_user_scram_credentials_req_scram_credential_upsertion *up; /* NULL: delete */
} alter_entry;

/* By user, then in request order, so each user's first change leads. */
static int alter_entry_cmp(const void *pa, const void *pb)
{
    const alter_entry *a = pa, *b = pb;
    int32_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = n > 0 ? memcmp(a->name.p, b->name.p, (size_t)n) : 0;
    if (c != 0)
        return c;
    if (a->name.len != b->name.len)
        return a->name.len < b->name.len ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

/* The problem with one change, or NONE. As Kafka's controller, an upsertion's
 * salt and salted password are taken as given (only a salt too long for the
 * store is refused). */
static int16_t check_change(const kb_scram_store *st, const alter_entry *e, const char **msg)
{
    if (e->name.len <= 0 || e->name.len > KB_SCRAM_USER_MAX) {
        *msg = e->name.len <= 0 ? "Username must not be empty" : "Username is too long";
        return KP_ERR_UNACCEPTABLE_CREDENTIAL;
    }
    if (e->mech != KB_SCRAM_SHA_256 && e->mech != KB_SCRAM_SHA_512) {
        *msg = "Unknown SCRAM mechanism";
        return KP_ERR_UNSUPPORTED_SASL_MECHANISM;
    }
    if (e->up == NULL) {
        if (kb_scram_store_find(st, e->name.p, (size_t)e->name.len, e->mech) != NULL)
            return KP_ERR_NONE;
        *msg = "Attempt to delete a user credential that does not exist";
        return KP_ERR_RESOURCE_NOT_FOUND;
    }
    *msg = e->up->iterations < KB_SCRAM_MIN_ITERATIONS   ? "Too few iterations"
           : e->up->iterations > KB_SCRAM_MAX_ITERATIONS ? "Too many iterations"
           : e->up->salt.len > KB_SCRAM_SALT_MAX         ? "Salt is too long"
                                                         : NULL;
    return *msg == NULL ? KP_ERR_NONE : KP_ERR_UNACCEPTABLE_CREDENTIAL;
}

static kp_err apply_change(kb_scram_store *st, const alter_entry *e)
{
    if (e->up == NULL)
        return kb_scram_store_delete(st, e->name.p, (size_t)e->name.len, e->mech);
    kb_scram_cred cred;
    kp_err err = kb_scram_cred_from_salted(
        (kb_scram_mech)e->mech, e->up->salted_password.p, (size_t)e->up->salted_password.len,
        e->up->salt.p, (size_t)e->up->salt.len, e->up->iterations, &cred);
    if (err == KP_ERR_NONE)
        err = kb_scram_store_put(st, e->name.p, (size_t)e->name.len, &cred);
    return err;
}

/* Checks then applies the changes of one user, entries v[0..n) in request
 * order. As in Kafka, the first change decides: its own error if it has one,
 * else DUPLICATE_RESOURCE when the user is named again, whatever the
 * mechanisms. */
static void alter_user(kb_req *req, const alter_entry *v, size_t n, bool *changed,
                       kp_alter_user_scram_credentials_resp_alter_user_scram_credentials_result *res)
{
    kb_scram_store *st = req->broker->scram;
    const char *msg = NULL;
    res->user = v[0].name;
    res->error_code = check_change(st, &v[0], &msg);
    if (res->error_code == KP_ERR_NONE && n > 1) {
        res->error_code = KP_ERR_DUPLICATE_RESOURCE;
        msg = "A user credential cannot be altered twice in the same request";
    }
    if (res->error_code == KP_ERR_NONE) {
        if (apply_change(st, &v[0]) != KP_ERR_NONE) {
            res->error_code = KP_ERR_UNKNOWN_SERVER_ERROR;
            msg = "Cannot store the credential";
        }
        *changed = true;
    }
    if (msg != NULL && res->error_code != KP_ERR_NONE)
        res->error_message = kp_str_from(msg);
}

kp_err kb_h_alter_user_scram_credentials(kb_req *req,
                                         const kp_alter_user_scram_credentials_req *rq,
                                         kp_alter_user_scram_credentials_resp *rs)
{
    size_t nd = rq->deletions.n > 0 ? (size_t)rq->deletions.n : 0;
    size_t nu = rq->upsertions.n > 0 ? (size_t)rq->upsertions.n : 0;
    alter_entry *v = kp_arena_calloc(&req->arena, nd + nu + 1, sizeof(*v));
    if (v == NULL || !KB_ARRAY_ALLOC(req, rs->results, nd + nu))
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < nd; i++)
        v[i] = (alter_entry){rq->deletions.v[i].name, rq->deletions.v[i].mechanism, i, NULL};
    for (size_t i = 0; i < nu; i++)
        v[nd + i] = (alter_entry){rq->upsertions.v[i].name, rq->upsertions.v[i].mechanism,
                                  nd + i, &rq->upsertions.v[i]};
    qsort(v, nd + nu, sizeof(*v), alter_entry_cmp);
    bool changed = false, allowed = kb_authz_cluster(req, KB_OP_ALTER);
    int32_t nres = 0;
    for (size_t i = 0, j; i < nd + nu; i = j) {
        for (j = i + 1; j < nd + nu && str_eq(v[j].name, v[i].name); j++)
            ;
        kp_alter_user_scram_credentials_resp_alter_user_scram_credentials_result *r =
            &rs->results.v[nres++];
        if (allowed) {
            alter_user(req, v + i, j - i, &changed, r);
        } else {
            r->user = v[i].name;
            r->error_code = KP_ERR_CLUSTER_AUTHORIZATION_FAILED;
            r->error_message = kb_cstr(kb_authz_message(r->error_code));
        }
    }
    rs->results.n = nres;
    if (changed && kb_scram_store_save(req->broker->scram) != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_STORAGE, "msg=\"cannot persist SCRAM credentials\" dir=%s",
               req->broker->cfg->log_dirs.v[0]);
        for (int32_t i = 0; i < nres; i++)
            if (rs->results.v[i].error_code == KP_ERR_NONE) {
                rs->results.v[i].error_code = KP_ERR_KAFKA_STORAGE_ERROR;
                rs->results.v[i].error_message = kp_str_from("Cannot persist the credentials");
            }
    }
    return KP_ERR_NONE;
}
