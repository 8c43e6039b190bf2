/* Forwarding's pure parts (kb_forward, kb_forward_errors): which requests a
 * Kafka 4.4 broker forwards, the principal bytes of the Envelope, and the
 * error response a request gets when the controller does not answer. */
#include <check.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_forward.h"
#include "kb_forward_errors.h"
#include "kp_msg.h"

START_TEST(test_forwarded_apis)
{
    kp_create_topics_req ct;
    kp_create_topics_req_defaults(&ct);
    ck_assert(kb_forward_wants(KP_API_CREATE_TOPICS, &ct));
    ck_assert(!kb_forward_wants(KP_API_METADATA, NULL));
    ck_assert(!kb_forward_wants(KP_API_DESCRIBE_CONFIGS, NULL));
    kp_incremental_alter_configs_req_alter_configs_resource res[2] = {
        {.resource_type = 8, .resource_name = KP_STR_LIT("1")},
        {.resource_type = 8, .resource_name = KP_STR_LIT("1")},
    };
    kp_incremental_alter_configs_req iac = {.resources = {2, res}};
    ck_assert(!kb_forward_wants(KP_API_INCREMENTAL_ALTER_CONFIGS, &iac)); /* loggers: local */
    res[1].resource_type = 2;                                              /* and a topic */
    ck_assert(kb_forward_wants(KP_API_INCREMENTAL_ALTER_CONFIGS, &iac));
}
END_TEST

START_TEST(test_principal_bytes_as_kafka_serializes_them)
{
    uint8_t out[64];
    size_t n = kb_forward_principal("User:alice", out, sizeof out);
    /* version 0; compact "User", compact "alice", false, no tagged fields */
    static const uint8_t want[] = {0, 0, 5, 'U', 's', 'e', 'r', 6, 'a', 'l', 'i', 'c', 'e', 0, 0};
    ck_assert_uint_eq(n, sizeof want);
    ck_assert_mem_eq(out, want, sizeof want);
    n = kb_forward_principal("User:CN=a:b", out, sizeof out); /* split at the first ':' */
    ck_assert_uint_eq(n, 2 + 5 + 7 + 2);
    ck_assert_mem_eq(out + 7, "\x07" "CN=a:b", 7);
    ck_assert_uint_eq(kb_forward_principal("User:alice", out, 8), 0); /* does not fit */
}
END_TEST

/* A request of api at version v as the dispatcher leaves it for a handler. */
static void make_req(kb_req *req, int16_t api, void *rq, void *rs)
{
    memset(req, 0, sizeof(*req));
    kp_arena_init(&req->arena);
    req->api = kp_api_lookup(api);
    req->api_key = api;
    req->request = rq;
    req->response = rs;
    req->api->response.defaults(rs);
}

START_TEST(test_error_response_echoes_the_request)
{
    kp_create_topics_req_creatable_topic topics[2] = {{.name = KP_STR_LIT("a")},
                                                      {.name = KP_STR_LIT("b")}};
    kp_create_topics_req rq = {.topics = {2, topics}};
    kp_create_topics_resp rs;
    kb_req req;
    make_req(&req, KP_API_CREATE_TOPICS, &rq, &rs);
    ck_assert(kb_forward_fill_error(&req, KP_ERR_REQUEST_TIMED_OUT));
    ck_assert_int_eq(rs.topics.n, 2);
    ck_assert(kp_str_eq(rs.topics.v[1].name, KP_STR_LIT("b")));
    ck_assert_int_eq(rs.topics.v[1].error_code, KP_ERR_REQUEST_TIMED_OUT);
    ck_assert_int_eq(rs.topics.v[1].error_message.len, -1); /* null, as Kafka's */
    ck_assert_int_eq(rs.topics.v[1].num_partitions, -1);
    kp_arena_fini(&req.arena);

    kp_alter_user_scram_credentials_req_scram_credential_deletion del[1] = {
        {.name = KP_STR_LIT("alice")}};
    kp_alter_user_scram_credentials_req_scram_credential_upsertion up[2] = {
        {.name = KP_STR_LIT("alice")}, {.name = KP_STR_LIT("bob")}};
    kp_alter_user_scram_credentials_req sq = {.deletions = {1, del}, .upsertions = {2, up}};
    kp_alter_user_scram_credentials_resp ss;
    make_req(&req, KP_API_ALTER_USER_SCRAM_CREDENTIALS, &sq, &ss);
    ck_assert(kb_forward_fill_error(&req, KP_ERR_UNKNOWN_SERVER_ERROR));
    ck_assert_int_eq(ss.results.n, 2); /* one result per user */
    ck_assert(kp_str_eq(ss.results.v[1].user, KP_STR_LIT("bob")));
    ck_assert(ss.results.v[0].error_message.len > 0);
    kp_arena_fini(&req.arena);

    kp_metadata_req mq;
    kp_metadata_resp ms;
    make_req(&req, KP_API_METADATA, &mq, &ms);
    ck_assert(!kb_forward_fill_error(&req, KP_ERR_REQUEST_TIMED_OUT));
    kp_arena_fini(&req.arena);
}
END_TEST

Suite *forward_suite(void)
{
    Suite *s = suite_create("forward");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_forwarded_apis);
    tcase_add_test(tc, test_principal_bytes_as_kafka_serializes_them);
    tcase_add_test(tc, test_error_response_echoes_the_request);
    suite_add_tcase(s, tc);
    return s;
}
