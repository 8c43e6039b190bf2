/* kb_conn and the request pipeline (kb_dispatch, kb_req) driven through a
 * socketpair() on a fake clock: a real broker (its loop stepped by the test,
 * kb_loop_step) serving one end, the test speaking Kafka's wire on the other.
 * Quota throttling is checked on the paths that once skipped it: a
 * compressed produce validated on a helper thread, and a long poll answered
 * after it parked. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_broker.h"
#include "kb_config.h"
#include "kb_conn.h"
#include "kb_log.h"
#include "kb_partition_log.h"
#include "kb_quota.h"
#include "kb_server.h"
#include "kb_topics.h"
#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"

#define TOPIC "pipe"
#define QUOTA_CLIENT "quota-client"
#define FREE_CLIENT "free-client"
#define STEPS 2000 /* bounded waits: loop steps of at most 5 ms */

static char tmpdir[64];
static char logdirs[96];
static char errbuf[256];
static kb_config *cfg;
static kb_broker broker;
static int64_t fake_now = 1000000;
static kb_topic *topic;

static int64_t fake_clock(void *arg)
{
    (void)arg;
    return fake_now;
}

static void step(int wait_ms)
{
    ck_assert_int_eq(kb_loop_step(broker.loop, wait_ms), KP_ERR_NONE);
}

static void advance(int64_t ms)
{
    fake_now += ms;
    step(0);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/runnel-test-conn-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(logdirs, sizeof logdirs, "log.dirs=%s", tmpdir);
    char *argv[] = {"runnel", "--override", logdirs, "--override",
                    "listeners=PLAINTEXT://127.0.0.1:0", "--override", "quota.window.num=2",
                    NULL};
    ck_assert_msg(kb_config_load(7, argv, NULL, &cfg, errbuf, sizeof errbuf) == KP_ERR_NONE,
                  "config: %s", errbuf);
    memset(&broker, 0, sizeof broker);
    ck_assert_msg(kb_broker_start(&broker, cfg, errbuf, sizeof errbuf) == KP_ERR_NONE,
                  "broker: %s", errbuf);
    kb_loop_set_clock(broker.loop, fake_clock, NULL);
    kb_msgbuf msg = {{0}};
    ck_assert_int_eq(kb_topics_create(broker.topics, kp_str_from(TOPIC), 1, NULL, 0, false,
                                      &topic, &msg),
                     KP_ERR_NONE);
}

static void teardown(void)
{
    char cmd[128];
    kb_broker_stop(&broker);
    kb_config_free(cfg);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

/* A connection served by the broker; returns the test's end of the pair. */
static int connect_pair(kb_conn **conn)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    *conn = kb_server_adopt(broker.server, 0, sv[0], "127.0.0.1:40000");
    ck_assert_ptr_nonnull(*conn);
    return sv[1];
}

static void set_quota(const char *key, double value)
{
    kb_quota_entity ent = {"client-id", QUOTA_CLIENT};
    kb_quota_op op = {key, value, false};
    ck_assert_int_eq(kb_quotas_alter(broker.quotas, &ent, 1, &op, 1), KP_ERR_NONE);
}

/* ---- the wire, by hand ------------------------------------------------------ */

typedef struct buf {
    uint8_t b[256 * 1024];
    size_t n;
} buf;

static void put(buf *o, const void *p, size_t n)
{
    ck_assert_uint_le(o->n + n, sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put16(buf *o, int16_t v)
{
    uint8_t p[2] = {(uint8_t)((uint16_t)v >> 8), (uint8_t)v};
    put(o, p, 2);
}

static void put32(buf *o, int32_t v)
{
    uint8_t p[4];
    kp_be32_put(p, v);
    put(o, p, 4);
}

static void put64(buf *o, int64_t v)
{
    uint8_t p[8];
    kp_be64_put(p, v);
    put(o, p, 8);
}

static void put_str(buf *o, const char *s)
{
    put16(o, (int16_t)strlen(s));
    put(o, s, strlen(s));
}

/* Starts a frame: size (patched by send_frame) and request header v1. */
static void begin(buf *o, int16_t key, int16_t version, int32_t corr, const char *client)
{
    o->n = 0;
    put32(o, 0);
    put16(o, key);
    put16(o, version);
    put32(o, corr);
    put_str(o, client);
}

static void send_frame(int fd, buf *o)
{
    kp_be32_put(o->b, (int32_t)(o->n - 4));
    ck_assert_int_eq(send(fd, o->b, o->n, MSG_NOSIGNAL), (ssize_t)o->n);
}

/* Reads one response frame if the broker wrote a whole one by now, stepping
 * the loop up to steps times (waiting up to 5 ms each); its length, 0 if
 * none came, -1 at EOF. Reads no byte past the frame. */
static ssize_t recv_frame(int fd, buf *in, int steps)
{
    in->n = 0;
    for (int i = 0; i <= steps; i++) {
        size_t want = in->n < 4 ? 4 - in->n : 4 + (size_t)kp_be32_get(in->b) - in->n;
        ck_assert_uint_le(in->n + want, sizeof in->b);
        ssize_t n = want > 0 ? recv(fd, in->b + in->n, want, 0) : 0;
        if (n == 0 && want > 0)
            return -1;
        if (n > 0)
            in->n += (size_t)n;
        if (in->n >= 4 && in->n == 4 + (size_t)kp_be32_get(in->b))
            return (ssize_t)in->n;
        ck_assert(n > 0 || errno == EAGAIN);
        if (i < steps && n <= 0)
            step(5);
    }
    ck_assert_uint_eq(in->n, 0); /* no partial frames in these tests */
    return 0;
}

static int32_t corr_of(const buf *in)
{
    return kp_be32_get(in->b + 4);
}

static void api_versions(int fd, int32_t corr)
{
    buf o;
    begin(&o, KP_API_API_VERSIONS, 0, corr, FREE_CLIENT);
    send_frame(fd, &o);
}

/* A magic-2 batch of count random 1 KiB values, gzip or uncompressed. */
static uint8_t *make_batch(int count, int codec, size_t *len)
{
    static uint8_t value[1024];
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, 0, -1, -1, -1);
    uint32_t x = 2463534242u;
    for (int i = 0; i < count; i++) {
        for (size_t k = 0; k < sizeof value; k++) { /* xorshift: gzip cannot shrink it */
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            value[k] = (uint8_t)x;
        }
        kp_batch_builder_add(&bb, fake_now, (kp_slice){NULL, -1}, (kp_slice){value, sizeof value},
                             NULL, 0);
    }
    uint8_t *out = NULL;
    ck_assert_int_eq(kp_batch_builder_finish_codec(&bb, codec, KP_COMPRESS_LEVEL_DEFAULT, &out, len),
                     KP_ERR_NONE);
    kp_batch_builder_fini(&bb);
    return out;
}

/* Produce v3..v8 (one layout): acks=1, one batch to partition 0. */
static void produce(int fd, int16_t version, int32_t corr, const char *client, int codec)
{
    size_t len;
    uint8_t *batch = make_batch(20, codec, &len);
    buf *o = malloc(sizeof *o);
    begin(o, KP_API_PRODUCE, version, corr, client);
    put16(o, -1); /* transactional id */
    put16(o, 1);  /* acks */
    put32(o, 30000);
    put32(o, 1);
    put_str(o, TOPIC);
    put32(o, 1);
    put32(o, 0);
    put32(o, (int32_t)len);
    put(o, batch, len);
    send_frame(fd, o);
    free(o);
    free(batch);
}

/* Fetch v4 (throttled responses delayed) or v8 (muted): partition 0 from offset. */
static void fetch(int fd, int16_t version, int32_t corr, int64_t offset, int32_t max_wait_ms)
{
    buf o;
    begin(&o, KP_API_FETCH, version, corr, QUOTA_CLIENT);
    put32(&o, -1); /* replica */
    put32(&o, max_wait_ms);
    put32(&o, 1);       /* min bytes */
    put32(&o, 1 << 20); /* max bytes */
    o.b[o.n++] = 0;     /* isolation level */
    if (version >= 7) {
        put32(&o, 0);  /* session id */
        put32(&o, -1); /* session epoch */
    }
    put32(&o, 1);
    put_str(&o, TOPIC);
    put32(&o, 1);
    put32(&o, 0);
    put64(&o, offset);
    if (version >= 5)
        put64(&o, -1); /* log start offset */
    put32(&o, 1 << 20);
    if (version >= 7)
        put32(&o, 0); /* forgotten topics */
    send_frame(fd, &o);
}

/* Produce v1+ responses end with throttle_time_ms. */
static int32_t produce_throttle(const buf *in)
{
    return kp_be32_get(in->b + in->n - 4);
}

/* Fetch v1+ responses start with throttle_time_ms. */
static int32_t fetch_throttle(const buf *in)
{
    return kp_be32_get(in->b + 8);
}

/* Appends one uncompressed batch to partition 0 as a produce would, waking
 * parked fetches. */
static void append_direct(void)
{
    size_t len;
    uint8_t *batch = make_batch(4, KP_CODEC_NONE, &len);
    ks_append_result res;
    ck_assert_int_eq(kb_partition_log_append(&broker, topic, 0, batch, len, &res), KP_ERR_NONE);
    kb_partition_log_appended(&broker, topic, 0);
    free(batch);
}

/* ---- tests ------------------------------------------------------------------ */

START_TEST(test_conn_answers_pipelined_requests_in_order)
{
    kb_conn *c;
    int fd = connect_pair(&c);
    api_versions(fd, 1);
    api_versions(fd, 2);
    buf in;
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_eq(corr_of(&in), 1);
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_eq(corr_of(&in), 2);
    ck_assert_int_eq(c->state, KB_CONN_READING);
    ck_assert(!kb_conn_in_flight(c));
    close(fd);
}
END_TEST

START_TEST(test_conn_closes_on_a_bad_frame_size)
{
    kb_conn *c;
    int fd = connect_pair(&c);
    uint8_t huge[4] = {0x7f, 0xff, 0xff, 0xff};
    ck_assert_int_eq(send(fd, huge, 4, 0), 4);
    buf in;
    ck_assert_int_eq(recv_frame(fd, &in, 10), -1);
    close(fd);
}
END_TEST

/* Defect 1 of issue 13: the helper-thread path of a compressed produce. */
START_TEST(test_conn_mutes_after_a_throttled_gzip_produce)
{
    set_quota("producer_byte_rate", 1000);
    kb_conn *c;
    int fd = connect_pair(&c);
    produce(fd, 7, 1, QUOTA_CLIENT, KP_CODEC_GZIP);
    buf in;
    ck_assert_int_gt(recv_frame(fd, &in, STEPS), 0); /* v7: answered at once */
    ck_assert_int_eq(corr_of(&in), 1);
    int32_t ms = produce_throttle(&in);
    ck_assert_int_gt(ms, 0);
    ck_assert_int_eq(c->state, KB_CONN_MUTED);
    api_versions(fd, 2);
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0); /* muted: not read */
    advance(ms - 1);
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0);
    advance(1);
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_eq(corr_of(&in), 2);
    ck_assert_int_eq(c->state, KB_CONN_READING);
    close(fd);
}
END_TEST

START_TEST(test_conn_delays_a_throttled_old_produce)
{
    set_quota("producer_byte_rate", 1000);
    kb_conn *c;
    int fd = connect_pair(&c);
    produce(fd, 3, 1, QUOTA_CLIENT, KP_CODEC_GZIP);
    buf in;
    ck_assert_int_eq(recv_frame(fd, &in, 100), 0); /* held: the response waits */
    ck_assert_int_eq(c->state, KB_CONN_PROCESSING);
    advance(2000); /* the throttle is capped at samples x window = 2 s */
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_eq(corr_of(&in), 1);
    ck_assert_int_gt(produce_throttle(&in), 0);
    ck_assert_int_eq(c->state, KB_CONN_READING);
    close(fd);
}
END_TEST

START_TEST(test_conn_free_client_is_not_throttled)
{
    set_quota("producer_byte_rate", 1000);
    kb_conn *c;
    int fd = connect_pair(&c);
    produce(fd, 7, 1, FREE_CLIENT, KP_CODEC_GZIP);
    buf in;
    ck_assert_int_gt(recv_frame(fd, &in, STEPS), 0);
    ck_assert_int_eq(produce_throttle(&in), 0);
    ck_assert_int_eq(c->state, KB_CONN_READING);
    close(fd);
}
END_TEST

/* Defect 2 of issue 13: a long poll answered after it parked. */
START_TEST(test_conn_mutes_after_a_throttled_long_poll)
{
    set_quota("consumer_byte_rate", 100);
    kb_conn *c;
    int fd = connect_pair(&c);
    fetch(fd, 8, 1, 0, 30000);
    buf in;
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0); /* parked: nothing to read */
    ck_assert_int_eq(c->state, KB_CONN_PROCESSING);
    append_direct();
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_eq(corr_of(&in), 1);
    int32_t ms = fetch_throttle(&in);
    ck_assert_int_gt(ms, 0);
    ck_assert_int_eq(c->state, KB_CONN_MUTED);
    advance(ms);
    ck_assert_int_eq(c->state, KB_CONN_READING);
    close(fd);
}
END_TEST

START_TEST(test_conn_delays_a_throttled_old_long_poll)
{
    set_quota("consumer_byte_rate", 100);
    kb_conn *c;
    int fd = connect_pair(&c);
    fetch(fd, 4, 1, 0, 30000);
    buf in;
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0);
    append_direct();
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0); /* woken, then held */
    ck_assert_int_eq(c->state, KB_CONN_PROCESSING);
    advance(2000);
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_gt(fetch_throttle(&in), 0);
    close(fd);
}
END_TEST

START_TEST(test_conn_long_poll_times_out_on_the_clock)
{
    kb_conn *c;
    int fd = connect_pair(&c);
    fetch(fd, 8, 1, 0, 500);
    buf in;
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0);
    advance(499);
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0);
    advance(1);
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    ck_assert_int_eq(fetch_throttle(&in), 0);
    ck_assert_int_eq(c->state, KB_CONN_READING);
    close(fd);
}
END_TEST

/* The connection closes while its response is held: the pipeline's cancel
 * releases what the response held (ASan checks nothing leaks). */
START_TEST(test_conn_close_while_a_response_is_held)
{
    set_quota("consumer_byte_rate", 100);
    kb_conn *c;
    int fd = connect_pair(&c);
    fetch(fd, 4, 1, 0, 30000);
    buf in;
    ck_assert_int_eq(recv_frame(fd, &in, 5), 0);
    append_direct();
    step(0);
    ck_assert_int_eq(c->state, KB_CONN_PROCESSING);
    ck_assert_ptr_nonnull(c->req.on_cancel);
    kb_conn_close(c, "test");
    ck_assert_int_eq(c->state, KB_CONN_CLOSED);
    step(0); /* the before-sleep hook frees the closed connection */
    advance(2000);
    ck_assert_int_eq(recv_frame(fd, &in, 5), -1);
    close(fd);
}
END_TEST

static void one_api_versions(void)
{
    kb_conn *c;
    int fd = connect_pair(&c);
    api_versions(fd, 7);
    buf in;
    ck_assert_int_gt(recv_frame(fd, &in, 10), 0);
    close(fd);
}

/* The finish step accounts for every request (a DEBUG line). */
START_TEST(test_conn_accounts_each_request)
{
    kb_log_set_level(KB_LL_DEBUG);
    const char *out = capture_stderr(one_api_versions);
    kb_log_set_level(KB_LL_INFO);
    ck_assert_ptr_nonnull(strstr(out, "msg=\"request completed\""));
    ck_assert_ptr_nonnull(strstr(out, "api_key=18 api_version=0 correlation_id=7"));
    ck_assert_ptr_nonnull(strstr(out, "client_id=\"" FREE_CLIENT "\""));
}
END_TEST

Suite *conn_suite(void)
{
    Suite *s = suite_create("conn");
    TCase *tc = tcase_create("socketpair");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_conn_answers_pipelined_requests_in_order);
    tcase_add_test(tc, test_conn_closes_on_a_bad_frame_size);
    tcase_add_test(tc, test_conn_mutes_after_a_throttled_gzip_produce);
    tcase_add_test(tc, test_conn_delays_a_throttled_old_produce);
    tcase_add_test(tc, test_conn_free_client_is_not_throttled);
    tcase_add_test(tc, test_conn_mutes_after_a_throttled_long_poll);
    tcase_add_test(tc, test_conn_delays_a_throttled_old_long_poll);
    tcase_add_test(tc, test_conn_long_poll_times_out_on_the_clock);
    tcase_add_test(tc, test_conn_close_while_a_response_is_held);
    tcase_add_test(tc, test_conn_accounts_each_request);
    suite_add_tcase(s, tc);
    return s;
}
