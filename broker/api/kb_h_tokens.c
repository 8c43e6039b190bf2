/* Handlers for the delegation token APIs (CreateDelegationToken,
 * RenewDelegationToken, ExpireDelegationToken, DescribeDelegationToken).
 *
 * Runnel issues no delegation tokens: it answers as a Kafka broker without
 * delegation.token.secret.key, Kafka's default. Kafka refuses token requests
 * on a connection that did not authenticate with SASL
 * (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, timestamps -1); after a SASL login
 * it answers DELEGATION_TOKEN_AUTH_DISABLED, with the zero timestamps of its
 * controller for create, renew and expire. A create response names the owner
 * (the requester unless v3 names another) and the requester. */
#include <string.h>

#include "kb_conn.h"
#include "kb_dispatch.h"

/* The timestamp Kafka's broker puts in a refused token response. */
#define NO_TIMESTAMP (-1)

static bool sasl_authenticated(const kb_req *req)
{
    kb_security_protocol p = req->listener->li_protocol;
    return p == KB_SEC_SASL_PLAINTEXT || p == KB_SEC_SASL_SSL;
}

static int16_t refusal(const kb_req *req)
{
    return sasl_authenticated(req) ? KP_ERR_DELEGATION_TOKEN_AUTH_DISABLED
                                   : KP_ERR_DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
}

/* Kafka's broker refuses with -1; its controller, asked after a SASL login, with 0. */
static int64_t refusal_timestamp(const kb_req *req)
{
    return sasl_authenticated(req) ? 0 : NO_TIMESTAMP;
}

/* Splits the connection's "Type:name" principal. */
static void principal_parts(const kb_req *req, kp_str *type, kp_str *name)
{
    const char *p = req->conn->principal;
    const char *colon = strchr(p, ':');
    if (colon == NULL) {
        *type = kp_str_from("User");
        *name = kp_str_from(p);
        return;
    }
    *type = (kp_str){p, (int32_t)(colon - p)};
    *name = kp_str_from(colon + 1);
}

kp_err kb_h_create_delegation_token(kb_req *req, const kp_create_delegation_token_req *rq,
                                    kp_create_delegation_token_resp *rs)
{
    rs->error_code = refusal(req);
    principal_parts(req, &rs->token_requester_principal_type,
                    &rs->token_requester_principal_name);
    bool other_owner = req->api_version >= 3 && rq->owner_principal_name.len >= 0;
    rs->principal_type = other_owner && rq->owner_principal_type.len >= 0
                             ? rq->owner_principal_type
                             : rs->token_requester_principal_type;
    rs->principal_name =
        other_owner ? rq->owner_principal_name : rs->token_requester_principal_name;
    rs->issue_timestamp_ms = refusal_timestamp(req);
    rs->expiry_timestamp_ms = refusal_timestamp(req);
    rs->max_timestamp_ms = refusal_timestamp(req);
    rs->token_id = KP_STR_LIT("");
    rs->hmac = (kp_slice){(const uint8_t *)"", 0};
    return KP_ERR_NONE;
}

/* Renew and expire answer alike: the refusal and its expiry timestamp. */
static void refuse_token_change(const kb_req *req, int16_t *error_code, int64_t *expiry)
{
    *error_code = refusal(req);
    *expiry = refusal_timestamp(req);
}

kp_err kb_h_renew_delegation_token(kb_req *req, const kp_renew_delegation_token_req *rq,
                                   kp_renew_delegation_token_resp *rs)
{
    (void)rq;
    refuse_token_change(req, &rs->error_code, &rs->expiry_timestamp_ms);
    return KP_ERR_NONE;
}

kp_err kb_h_expire_delegation_token(kb_req *req, const kp_expire_delegation_token_req *rq,
                                    kp_expire_delegation_token_resp *rs)
{
    (void)rq;
    refuse_token_change(req, &rs->error_code, &rs->expiry_timestamp_ms);
    return KP_ERR_NONE;
}

kp_err kb_h_describe_delegation_token(kb_req *req, const kp_describe_delegation_token_req *rq,
                                      kp_describe_delegation_token_resp *rs)
{
    (void)rq;
    rs->error_code = refusal(req);
    rs->tokens.n = 0; /* Kafka describes no token while they are off */
    return KP_ERR_NONE;
}
