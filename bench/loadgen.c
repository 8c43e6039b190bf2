/*
 * loadgen: a Kafka load generator on the public librdkafka API, used by
 * bench/run against Runnel and Apache Kafka alike (and against librdkafka's
 * own in-memory mock cluster, which gives the client's ceiling).
 *
 * Job: produce or consume a stream of fixed-size records as fast as allowed
 * (or at a fixed rate) and print one machine-readable line:
 *
 *   RESULT mode=produce records=N bytes=B secs=S rec_s=R mb_s=M errors=E
 *          lat=ack|e2e|none p50_ms=.. p99_ms=.. p999_ms=.. max_ms=..
 *
 * mb_s counts record value bytes, 1 MB = 1e6 bytes. Latency is measured in
 * microseconds from a CLOCK_MONOTONIC timestamp that the producer writes into
 * the first 8 bytes of every value (the next 8 hold the record's sequence
 * number): "ack" is send to delivery report, "e2e" is send to the consumer
 * seeing the record (same host: the clock is system wide).
 *
 * Modes:
 *   produce   send -n records (or until -T seconds pass) round-robin over
 *             partitions 0..-p-1, wait for every delivery report
 *   consume   read -n records from partitions 0..-p-1 with the simple
 *             (group-free) consumer, starting at -o; --latency reports e2e
 *   latency   one process: a consumer thread at the partitions' end, and a
 *             producer at -r records/s; the first --warmup records are sent
 *             but not counted
 *   create    create topic -t with -p partitions (ok if it exists), wait
 *             until every partition has a leader
 *   delete    delete topic -t
 *   offsets   print the sum of the partitions' high watermarks once the
 *             broker answers (retrying until -T)
 *
 * Exit status: 0 when the run completed, 1 on usage errors, 2 when the run
 * failed (delivery errors, timeout before all records were seen, ...). A
 * benchmark tool: it never judges speed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MAX_EXTRA   32
#define HDR_BYTES   16 /* timestamp ns + sequence number, both big-endian */
#define HIST_SUB    512
#define HIST_DIRECT 1024
#define HIST_SHIFTS 40
#define HIST_SIZE   (HIST_DIRECT + HIST_SHIFTS * HIST_SUB)

/* Log-linear histogram of microsecond values: exact below 1024 us, then
 * 512 sub-buckets per power of two (relative error under 0.2%). */
struct hist {
    uint64_t h_count[HIST_SIZE];
    uint64_t h_total;
    uint64_t h_max;
};

struct opts {
    const char *mode;
    const char *brokers;
    const char *topic;
    const char *compression;
    const char *start; /* consume: beginning|end|<offset> */
    const char *extra[MAX_EXTRA];
    int n_extra;
    int mock_brokers;
    int partitions;
    int acks;
    int linger_ms;
    int batch_bytes;
    long size;
    long long count;
    long long warmup;
    double rate;
    double timeout_s;
    double stall_s;
    bool latency;
};

struct run {
    const struct opts *o;
    struct hist hist;
    _Atomic long long delivered;
    _Atomic long long seen;
    _Atomic int64_t last_progress; /* mono ns of the last delivery report */
    long long sent;
    long long errors;
    long long bytes;
    rd_kafka_resp_err_t first_err;
};

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

static uint64_t get_be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static size_t hist_index(uint64_t us)
{
    if (us < HIST_DIRECT)
        return (size_t)us;
    int msb = 63 - __builtin_clzll(us);
    int shift = msb - 9; /* us >> shift lies in [512, 1023] */
    if (shift > HIST_SHIFTS)
        return HIST_SIZE - 1;
    return HIST_DIRECT + (size_t)(shift - 1) * HIST_SUB + (size_t)((us >> shift) - HIST_SUB);
}

static double hist_value_us(size_t idx)
{
    if (idx < HIST_DIRECT)
        return (double)idx;
    size_t shift = (idx - HIST_DIRECT) / HIST_SUB + 1;
    uint64_t m = (idx - HIST_DIRECT) % HIST_SUB + HIST_SUB;
    return (double)(m << shift) + (double)((uint64_t)1 << shift) / 2.0;
}

static void hist_add(struct hist *h, uint64_t us)
{
    h->h_count[hist_index(us)]++;
    h->h_total++;
    if (us > h->h_max)
        h->h_max = us;
}

static double hist_pct_ms(const struct hist *h, double pct)
{
    if (h->h_total == 0)
        return 0.0;
    uint64_t want = (uint64_t)((double)h->h_total * pct / 100.0 + 0.5);
    if (want < 1)
        want = 1;
    uint64_t acc = 0;
    for (size_t i = 0; i < HIST_SIZE; i++) {
        acc += h->h_count[i];
        if (acc >= want)
            return hist_value_us(i) / 1000.0;
    }
    return (double)h->h_max / 1000.0;
}

/* Records a latency sample from a value written by fill_value(). */
static void sample_value(struct run *r, const void *payload, size_t len, int64_t now)
{
    if (len < HDR_BYTES)
        return;
    const unsigned char *p = payload;
    int64_t sent = (int64_t)get_be64(p);
    long long seq = (long long)get_be64(p + 8);
    if (seq < r->o->warmup || now < sent)
        return;
    hist_add(&r->hist, (uint64_t)(now - sent) / 1000);
}

static void fill_value(unsigned char *buf, size_t len, long long seq)
{
    if (len < HDR_BYTES)
        return;
    put_be64(buf, (uint64_t)mono_ns());
    put_be64(buf + 8, (uint64_t)seq);
}

/* Filler that does not compress to nothing: a xorshift stream. */
static void fill_random(unsigned char *buf, size_t len)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = (unsigned char)(x >> 24);
    }
}

static int conf_set(rd_kafka_conf_t *conf, const char *key, const char *val)
{
    char err[256];
    if (rd_kafka_conf_set(conf, key, val, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "loadgen: config %s=%s: %s\n", key, val, err);
        return -1;
    }
    return 0;
}

/* Common client configuration: brokers or the mock cluster, then -X pairs. */
static rd_kafka_conf_t *base_conf(const struct opts *o)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char num[32];
    int rc = conf_set(conf, "client.id", "runnel-loadgen");
    if (o->mock_brokers > 0) {
        snprintf(num, sizeof(num), "%d", o->mock_brokers);
        rc |= conf_set(conf, "test.mock.num.brokers", num);
    } else {
        rc |= conf_set(conf, "bootstrap.servers", o->brokers);
    }
    for (int i = 0; i < o->n_extra && rc == 0; i++) {
        char kv[512];
        snprintf(kv, sizeof(kv), "%s", o->extra[i]);
        char *eq = strchr(kv, '=');
        if (eq == NULL) {
            fprintf(stderr, "loadgen: -X wants key=value, got %s\n", kv);
            rc = -1;
            break;
        }
        *eq = '\0';
        rc |= conf_set(conf, kv, eq + 1);
    }
    if (rc != 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

static rd_kafka_t *new_client(rd_kafka_type_t type, rd_kafka_conf_t *conf)
{
    char err[256];
    rd_kafka_t *rk = rd_kafka_new(type, conf, err, sizeof(err));
    if (rk == NULL) {
        fprintf(stderr, "loadgen: rd_kafka_new: %s\n", err);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

/* Waits until topic has o->partitions partitions, each with a leader. */
static int wait_leaders(rd_kafka_t *rk, const struct opts *o, double timeout_s)
{
    int64_t deadline = mono_ns() + (int64_t)(timeout_s * 1e9);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    int ok = -1;
    while (ok != 0 && mono_ns() < deadline) {
        const struct rd_kafka_metadata *md = NULL;
        if (rd_kafka_metadata(rk, 0, rkt, &md, 2000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
            const struct rd_kafka_metadata_topic *t = md->topic_cnt == 1 ? &md->topics[0] : NULL;
            if (t != NULL && t->err == 0 && t->partition_cnt >= o->partitions) {
                ok = 0;
                for (int i = 0; i < t->partition_cnt; i++)
                    if (t->partitions[i].leader < 0 || t->partitions[i].err != 0)
                        ok = -1;
            }
            rd_kafka_metadata_destroy(md);
        }
        if (ok != 0) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    rd_kafka_topic_destroy(rkt);
    if (ok != 0)
        fprintf(stderr, "loadgen: topic %s: partitions without a leader after %.0fs\n", o->topic,
                timeout_s);
    return ok;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct run *r = opaque;
    (void)rk;
    if (m->err != 0) {
        if (r->errors++ == 0)
            r->first_err = m->err;
        return;
    }
    if (r->o->latency || r->o->rate > 0)
        sample_value(r, m->payload, m->len, mono_ns());
    r->bytes += (long long)m->len;
    atomic_fetch_add(&r->delivered, 1);
    atomic_store(&r->last_progress, mono_ns());
}

static rd_kafka_t *new_producer(const struct opts *o, struct run *r)
{
    rd_kafka_conf_t *conf = base_conf(o);
    if (conf == NULL)
        return NULL;
    char acks[16], linger[16], batch[16];
    snprintf(acks, sizeof(acks), "%d", o->acks);
    snprintf(linger, sizeof(linger), "%d", o->linger_ms);
    snprintf(batch, sizeof(batch), "%d", o->batch_bytes);
    if (conf_set(conf, "acks", acks) || conf_set(conf, "linger.ms", linger) ||
        conf_set(conf, "batch.size", batch) ||
        conf_set(conf, "compression.codec", o->compression) ||
        conf_set(conf, "message.timeout.ms", "300000")) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, r);
    return new_client(RD_KAFKA_PRODUCER, conf);
}

/* The mock cluster auto-creates topics with its default partition count:
 * create ours with the wanted count instead. */
static int mock_topic(rd_kafka_t *rk, const struct opts *o)
{
    rd_kafka_mock_cluster_t *mc = rd_kafka_handle_mock_cluster(rk);
    if (mc == NULL)
        return 0;
    rd_kafka_resp_err_t err = rd_kafka_mock_topic_create(mc, o->topic, o->partitions, 1);
    if (err != 0) {
        fprintf(stderr, "loadgen: mock topic: %s\n", rd_kafka_err2str(err));
        return -1;
    }
    return 0;
}

/* Sleeps until the send time of record seq at o->rate, serving callbacks. */
static void pace(rd_kafka_t *rk, const struct opts *o, int64_t t0, long long seq)
{
    int64_t due = t0 + (int64_t)((double)seq * 1e9 / o->rate);
    for (;;) {
        int64_t now = mono_ns();
        if (now >= due)
            return;
        int64_t wait_ms = (due - now) / 1000000;
        if (wait_ms > 0) {
            rd_kafka_poll(rk, (int)(wait_ms > 100 ? 100 : wait_ms));
        } else {
            rd_kafka_poll(rk, 0);
            struct timespec ts = {0, (long)(due - now)};
            nanosleep(&ts, NULL);
        }
    }
}

static bool stalled(const struct run *r)
{
    return mono_ns() - atomic_load(&r->last_progress) > (int64_t)(r->o->stall_s * 1e9);
}

static int send_one(rd_kafka_t *rk, struct run *r, unsigned char *buf, long long seq)
{
    const struct opts *o = r->o;
    for (;;) {
        fill_value(buf, (size_t)o->size, seq);
        rd_kafka_resp_err_t err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(o->topic), RD_KAFKA_V_PARTITION((int32_t)(seq % o->partitions)),
            RD_KAFKA_V_VALUE(buf, (size_t)o->size), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR_NO_ERROR)
            return 0;
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "loadgen: produce: %s\n", rd_kafka_err2str(err));
            return -1;
        }
        if (stalled(r)) {
            fprintf(stderr, "loadgen: queue full and no delivery for %.0fs\n", o->stall_s);
            return -1;
        }
        rd_kafka_poll(rk, 1);
    }
}

/* Sends o->count records (or until the time limit) and waits for their
 * delivery reports as long as they keep coming (a broker that stops answering
 * for o->stall_s ends the wait). Returns the seconds from first send to the
 * last report. */
static double produce_loop(rd_kafka_t *rk, const struct opts *o, struct run *r)
{
    unsigned char *buf = malloc((size_t)o->size + 1);
    if (buf == NULL)
        return -1.0;
    fill_random(buf, (size_t)o->size);
    int64_t t0 = mono_ns();
    int64_t stop = t0 + (int64_t)(o->timeout_s * 1e9);
    long long seq = 0;
    atomic_store(&r->last_progress, t0);
    for (; seq < o->count && mono_ns() < stop; seq++) {
        if (o->rate > 0)
            pace(rk, o, t0, seq);
        if (send_one(rk, r, buf, seq) != 0)
            break;
        if ((seq & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    r->sent = seq;
    free(buf);
    while (rd_kafka_outq_len(rk) > 0 && !stalled(r))
        rd_kafka_poll(rk, 50);
    int64_t last = atomic_load(&r->last_progress);
    return (double)((last > t0 ? last : mono_ns()) - t0) / 1e9;
}

/* A broker that stopped answering would hold rd_kafka_destroy() until its
 * requests time out (a minute): a failed run exits at once instead. */
static _Noreturn void fail_fast(void)
{
    fflush(stdout);
    fflush(stderr);
    _exit(2);
}

static void print_result(const char *mode, const struct run *r, long long records, double secs,
                         const char *lat)
{
    double s = secs > 0 ? secs : 1e-9;
    bool has_lat = r->hist.h_total > 0;
    printf("RESULT mode=%s records=%lld bytes=%lld secs=%.4f rec_s=%.1f mb_s=%.2f errors=%lld "
           "lat=%s p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f samples=%" PRIu64 "\n",
           mode, records, r->bytes, secs, (double)records / s, (double)r->bytes / s / 1e6,
           r->errors, has_lat ? lat : "none", hist_pct_ms(&r->hist, 50.0),
           hist_pct_ms(&r->hist, 99.0), hist_pct_ms(&r->hist, 99.9),
           (double)r->hist.h_max / 1000.0, r->hist.h_total);
    fflush(stdout);
}

static int cmd_produce(const struct opts *o)
{
    struct run *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return 2;
    r->o = o;
    rd_kafka_t *rk = new_producer(o, r);
    if (rk == NULL || mock_topic(rk, o) != 0 || wait_leaders(rk, o, 15.0) != 0) {
        if (rk != NULL)
            rd_kafka_destroy(rk);
        free(r);
        return 2;
    }
    double secs = produce_loop(rk, o, r);
    long long done = atomic_load(&r->delivered);
    print_result("produce", r, done, secs, "ack");
    int rc = (r->errors == 0 && done == r->sent && secs >= 0) ? 0 : 2;
    if (r->errors != 0)
        fprintf(stderr, "loadgen: %lld delivery errors, first: %s\n", r->errors,
                rd_kafka_err2str(r->first_err));
    if (done != r->sent) {
        fprintf(stderr, "loadgen: %lld of %lld records acknowledged, then none for %.0fs\n",
                done, r->sent, o->stall_s);
        fail_fast();
    }
    rd_kafka_destroy(rk);
    free(r);
    return rc;
}

/* The simple consumer: every partition of the topic into one queue, no
 * consumer group involved. */
struct consumer {
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt;
    rd_kafka_queue_t *q;
    int partitions;
};

static int64_t start_offset(const char *s)
{
    if (strcmp(s, "beginning") == 0)
        return RD_KAFKA_OFFSET_BEGINNING;
    if (strcmp(s, "end") == 0)
        return RD_KAFKA_OFFSET_END;
    return strtoll(s, NULL, 10);
}

static int consumer_open(struct consumer *c, const struct opts *o, bool at_end)
{
    rd_kafka_conf_t *conf = base_conf(o);
    if (conf == NULL || conf_set(conf, "enable.partition.eof", "false") != 0)
        return -1;
    c->rk = new_client(RD_KAFKA_CONSUMER, conf);
    if (c->rk == NULL || wait_leaders(c->rk, o, 15.0) != 0)
        return -1;
    c->rkt = rd_kafka_topic_new(c->rk, o->topic, NULL);
    c->q = rd_kafka_queue_new(c->rk);
    c->partitions = o->partitions;
    for (int p = 0; p < o->partitions; p++) {
        int64_t off = start_offset(o->start);
        if (at_end) { /* an explicit offset: no race with the first records */
            int64_t lo = 0, hi = 0;
            if (rd_kafka_query_watermark_offsets(c->rk, o->topic, p, &lo, &hi, 10000) != 0) {
                fprintf(stderr, "loadgen: watermarks of partition %d unavailable\n", p);
                return -1;
            }
            off = hi;
        }
        if (rd_kafka_consume_start_queue(c->rkt, p, off, c->q) != 0) {
            fprintf(stderr, "loadgen: consume_start %d: %s\n", p,
                    rd_kafka_err2str(rd_kafka_last_error()));
            return -1;
        }
    }
    return 0;
}

static void consumer_close(struct consumer *c)
{
    if (c->rkt != NULL) {
        for (int p = 0; p < c->partitions; p++)
            rd_kafka_consume_stop(c->rkt, p);
        rd_kafka_topic_destroy(c->rkt);
    }
    if (c->q != NULL)
        rd_kafka_queue_destroy(c->q);
    if (c->rk != NULL)
        rd_kafka_destroy(c->rk);
}

struct consume_state {
    struct run *r;
    int64_t last; /* mono ns of the last record */
};

/* Called for each message the queue holds (the callback API hands over
 * whatever has arrived at once, where the batch API waits to fill a batch). */
static void on_message(rd_kafka_message_t *m, void *opaque)
{
    struct consume_state *cs = opaque;
    struct run *r = cs->r;
    if (m->err == 0) {
        int64_t now = mono_ns();
        if (r->o->latency)
            sample_value(r, m->payload, m->len, now);
        r->bytes += (long long)m->len;
        atomic_fetch_add(&r->seen, 1);
        cs->last = now;
    } else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
        if (r->errors++ == 0)
            fprintf(stderr, "loadgen: consume: %s\n", rd_kafka_message_errstr(m));
    }
}

/* Reads until want records were seen or deadline (mono ns) passes. Returns
 * the time of the last record, or 0 if none came. */
static int64_t consume_until(struct consumer *c, struct run *r, long long want, int64_t deadline)
{
    struct consume_state cs = {r, 0};
    while (atomic_load(&r->seen) < want && mono_ns() < deadline)
        rd_kafka_consume_callback_queue(c->q, 100, on_message, &cs);
    return cs.last;
}

static int cmd_consume(const struct opts *o)
{
    struct run *r = calloc(1, sizeof(*r));
    struct consumer c = {0};
    int rc = 2;
    if (r == NULL)
        return 2;
    r->o = o;
    if (consumer_open(&c, o, false) == 0) {
        int64_t t0 = mono_ns();
        int64_t last = consume_until(&c, r, o->count, t0 + (int64_t)(o->timeout_s * 1e9));
        long long seen = atomic_load(&r->seen);
        double secs = last > t0 ? (double)(last - t0) / 1e9 : 0.0;
        print_result("consume", r, seen, secs, "e2e");
        rc = seen >= o->count && r->errors == 0 ? 0 : 2;
        if (seen < o->count)
            fprintf(stderr, "loadgen: saw %lld of %lld records before the time limit\n", seen,
                    o->count);
    }
    consumer_close(&c);
    free(r);
    return rc;
}

struct latency_ctx {
    struct consumer *c;
    struct run *r;
    long long want;
    _Atomic int64_t deadline; /* moved up once the producer is done */
};

static void *latency_consumer(void *arg)
{
    struct latency_ctx *lc = arg;
    struct consume_state cs = {lc->r, 0};
    while (atomic_load(&lc->r->seen) < lc->want && mono_ns() < atomic_load(&lc->deadline))
        rd_kafka_consume_callback_queue(lc->c->q, 100, on_message, &cs);
    return NULL;
}

/* A producer at a fixed rate and a consumer thread in one process: e2e
 * latency from send to receipt, without clock skew between processes. */
static int cmd_latency(struct opts *o)
{
    struct run *rc_run = calloc(1, sizeof(*rc_run)); /* consumer side: e2e */
    struct run *rp_run = calloc(1, sizeof(*rp_run)); /* producer side: ack */
    struct consumer c = {0};
    rd_kafka_t *rk = NULL;
    int rc = 2;
    if (rc_run == NULL || rp_run == NULL || o->rate <= 0) {
        fprintf(stderr, "loadgen: latency mode needs -r RATE\n");
        goto out;
    }
    o->latency = true;
    o->count += o->warmup;
    rc_run->o = rp_run->o = o;
    if (consumer_open(&c, o, true) != 0)
        goto out;
    rk = new_producer(o, rp_run);
    if (rk == NULL)
        goto out;
    struct latency_ctx lc = {&c, rc_run, o->count, mono_ns() + (int64_t)(o->timeout_s * 2e9)};
    pthread_t th;
    if (pthread_create(&th, NULL, latency_consumer, &lc) != 0)
        goto out;
    double secs = produce_loop(rk, o, rp_run);
    /* Every record was acknowledged: the consumer gets o->stall_s more. */
    atomic_store(&lc.deadline, mono_ns() + (int64_t)(o->stall_s * 1e9));
    pthread_join(th, NULL);
    long long seen = atomic_load(&rc_run->seen);
    print_result("latency", rc_run, seen - o->warmup, secs, "e2e");
    print_result("latency_ack", rp_run, atomic_load(&rp_run->delivered) - o->warmup, secs, "ack");
    long long acked = atomic_load(&rp_run->delivered);
    rc = seen >= rp_run->sent && acked == rp_run->sent && rp_run->errors == 0 &&
                 rc_run->errors == 0
             ? 0
             : 2;
    if (rc != 0) {
        fprintf(stderr, "loadgen: sent %lld, acknowledged %lld, consumed %lld\n", rp_run->sent,
                acked, seen);
        fail_fast();
    }
out:
    if (rk != NULL)
        rd_kafka_destroy(rk);
    consumer_close(&c);
    free(rc_run);
    free(rp_run);
    return rc;
}

/* Runs one admin request and waits for its result event (bounded). */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, rd_kafka_event_type_t type, int ms)
{
    int64_t deadline = mono_ns() + (int64_t)ms * 1000000;
    while (mono_ns() < deadline) {
        rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 200);
        if (ev == NULL)
            continue;
        if (rd_kafka_event_type(ev) == type)
            return ev;
        rd_kafka_event_destroy(ev);
    }
    return NULL;
}

static int topic_result_ok(const rd_kafka_topic_result_t **res, size_t n, bool creating)
{
    for (size_t i = 0; i < n; i++) {
        rd_kafka_resp_err_t err = rd_kafka_topic_result_error(res[i]);
        if (err == 0 || (creating && err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) ||
            (!creating && err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART))
            continue;
        fprintf(stderr, "loadgen: topic %s: %s\n", rd_kafka_topic_result_name(res[i]),
                rd_kafka_topic_result_error_string(res[i]));
        return -1;
    }
    return 0;
}

static int admin_topic(const struct opts *o, bool creating)
{
    char err[256];
    rd_kafka_conf_t *conf = base_conf(o);
    if (conf == NULL)
        return 2;
    rd_kafka_t *rk = new_client(RD_KAFKA_PRODUCER, conf);
    if (rk == NULL)
        return 2;
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_event_t *ev = NULL;
    int rc = 2;
    if (creating) {
        rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(o->topic, o->partitions, 1, err, sizeof(err));
        if (nt == NULL) {
            fprintf(stderr, "loadgen: NewTopic: %s\n", err);
            goto out;
        }
        rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
        rd_kafka_NewTopic_destroy(nt);
        ev = admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT, 30000);
    } else {
        rd_kafka_DeleteTopic_t *dt = rd_kafka_DeleteTopic_new(o->topic);
        rd_kafka_DeleteTopics(rk, &dt, 1, NULL, q);
        rd_kafka_DeleteTopic_destroy(dt);
        ev = admin_wait(q, RD_KAFKA_EVENT_DELETETOPICS_RESULT, 30000);
    }
    if (ev == NULL || rd_kafka_event_error(ev) != 0) {
        fprintf(stderr, "loadgen: admin request: %s\n",
                ev != NULL ? rd_kafka_event_error_string(ev) : "timed out");
        goto out;
    }
    size_t n = 0;
    const rd_kafka_topic_result_t **res =
        creating ? rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n)
                 : rd_kafka_DeleteTopics_result_topics(rd_kafka_event_DeleteTopics_result(ev), &n);
    if (topic_result_ok(res, n, creating) == 0)
        rc = creating ? (wait_leaders(rk, o, 30.0) == 0 ? 0 : 2) : 0;
out:
    if (ev != NULL)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    if (rc == 0)
        printf("RESULT mode=%s topic=%s partitions=%d\n", o->mode, o->topic, o->partitions);
    return rc;
}

/* Sum of the high watermarks, retried until the broker answers. */
static int cmd_offsets(const struct opts *o)
{
    rd_kafka_conf_t *conf = base_conf(o);
    if (conf == NULL)
        return 2;
    rd_kafka_t *rk = new_client(RD_KAFKA_CONSUMER, conf);
    if (rk == NULL)
        return 2;
    int64_t t0 = mono_ns();
    int64_t deadline = t0 + (int64_t)(o->timeout_s * 1e9);
    long long sum = -1;
    while (sum < 0 && mono_ns() < deadline) {
        sum = 0;
        for (int p = 0; p < o->partitions && sum >= 0; p++) {
            int64_t lo = 0, hi = 0;
            if (rd_kafka_query_watermark_offsets(rk, o->topic, p, &lo, &hi, 1000) != 0)
                sum = -1;
            else
                sum += hi;
        }
    }
    rd_kafka_destroy(rk);
    if (sum < 0) {
        fprintf(stderr, "loadgen: no watermarks for %s within %.0fs\n", o->topic, o->timeout_s);
        return 2;
    }
    printf("RESULT mode=offsets topic=%s high=%lld secs=%.4f\n", o->topic, sum,
           (double)(mono_ns() - t0) / 1e9);
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen produce|consume|latency|create|delete|offsets [options]\n"
            "  -b HOST:PORT   bootstrap servers (default 127.0.0.1:9092)\n"
            "  -M N           use librdkafka's mock cluster with N brokers instead\n"
            "  -t TOPIC       topic (default loadgen)\n"
            "  -p N           partitions used, 0..N-1 (default 1)\n"
            "  -s BYTES       record value size (default 100; >= 16 carries a timestamp)\n"
            "  -n COUNT       records (default 1000000)\n"
            "  -a ACKS        0, 1 or -1 (default 1)\n"
            "  -l MS          linger.ms (default 5)\n"
            "  -B BYTES       batch.size (default 1000000)\n"
            "  -z CODEC       none|gzip|snappy|lz4|zstd (default none)\n"
            "  -r RATE        records/s, 0 = as fast as possible (default 0)\n"
            "  -o START       consume: beginning|end|OFFSET (default beginning)\n"
            "  -T SECONDS     time limit for sending (consume: for reading) (default 60)\n"
            "  -S SECONDS     give up when no delivery report came for this long (default 10)\n"
            "  -w COUNT       latency: warm-up records not counted (default 0)\n"
            "  -L             consume: report e2e latency from the values' timestamps\n"
            "  -X KEY=VALUE   any librdkafka property (repeatable)\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.brokers = "127.0.0.1:9092", .topic = "loadgen", .compression = "none",
                       .start = "beginning", .partitions = 1, .acks = 1, .linger_ms = 5,
                       .batch_bytes = 1000000, .size = 100, .count = 1000000, .timeout_s = 60,
                       .stall_s = 10};
    int ch;
    while ((ch = getopt(argc, argv, "b:M:t:p:s:n:a:l:B:z:r:o:T:S:w:LX:h")) != -1) {
        switch (ch) {
        case 'b': o->brokers = optarg; break;
        case 'M': o->mock_brokers = atoi(optarg); break;
        case 't': o->topic = optarg; break;
        case 'p': o->partitions = atoi(optarg); break;
        case 's': o->size = atol(optarg); break;
        case 'n': o->count = atoll(optarg); break;
        case 'a': o->acks = atoi(optarg); break;
        case 'l': o->linger_ms = atoi(optarg); break;
        case 'B': o->batch_bytes = atoi(optarg); break;
        case 'z': o->compression = optarg; break;
        case 'r': o->rate = atof(optarg); break;
        case 'o': o->start = optarg; break;
        case 'T': o->timeout_s = atof(optarg); break;
        case 'S': o->stall_s = atof(optarg); break;
        case 'w': o->warmup = atoll(optarg); break;
        case 'L': o->latency = true; break;
        case 'X':
            if (o->n_extra == MAX_EXTRA)
                return -1;
            o->extra[o->n_extra++] = optarg;
            break;
        default: return -1;
        }
    }
    if (optind != argc - 1)
        return -1;
    o->mode = argv[optind];
    if (o->partitions < 1 || o->size < 1 || o->count < 0 || o->timeout_s <= 0 || o->stall_s <= 0 ||
        o->warmup < 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o) != 0) {
        usage();
        return 1;
    }
    if (strcmp(o.mode, "produce") == 0)
        return cmd_produce(&o);
    if (strcmp(o.mode, "consume") == 0)
        return cmd_consume(&o);
    if (strcmp(o.mode, "latency") == 0)
        return cmd_latency(&o);
    if (strcmp(o.mode, "create") == 0)
        return admin_topic(&o, true);
    if (strcmp(o.mode, "delete") == 0)
        return admin_topic(&o, false);
    if (strcmp(o.mode, "offsets") == 0)
        return cmd_offsets(&o);
    usage();
    return 1;
}
