/* decode_bench: the cost of decoding a Produce and a Fetch request with the
 * generated codecs (protocol/msg), in nanoseconds per request.
 *
 * The requests are those a client sends in steady state: Produce v11 with
 * one topic of 8 partitions of 16 KiB batches (the records stay borrowed,
 * so their size hardly matters), and Fetch v16 for one topic of 16
 * partitions. Each is encoded once, then decoded ROUNDS times into an
 * arena reset between rounds; the best of 5 runs of thread CPU time is
 * printed.
 *
 *   bench/decode_bench [ROUNDS]      (default 2000000)
 *
 * Built with the tree's protocol library, so checking out another commit
 * and rebuilding measures that commit's codec (docs/benchmarks.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kp_msg.h"

#define PRODUCE_VERSION 11
#define FETCH_VERSION 16
#define PRODUCE_PARTITIONS 8
#define FETCH_PARTITIONS 16
#define BATCH_BYTES 16384

static uint8_t batch[BATCH_BYTES];

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts); /* CPU time: the machine is shared */
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void encode_produce(kp_writer *w)
{
    static kp_produce_req_partition_produce_data parts[PRODUCE_PARTITIONS];
    static kp_produce_req_topic_produce_data topic;
    kp_produce_req rq;
    kp_produce_req_defaults(&rq);
    kp_produce_req_topic_produce_data_defaults(&topic);
    for (int i = 0; i < PRODUCE_PARTITIONS; i++) {
        kp_produce_req_partition_produce_data_defaults(&parts[i]);
        parts[i].index = i;
        parts[i].records = (kp_records){batch, BATCH_BYTES, NULL};
    }
    topic.name = KP_STR_LIT("bench-topic");
    topic.partition_data.n = PRODUCE_PARTITIONS;
    topic.partition_data.v = parts;
    rq.acks = -1;
    rq.timeout_ms = 30000;
    rq.topic_data.n = 1;
    rq.topic_data.v = &topic;
    kp_produce_req_encode(w, &rq, PRODUCE_VERSION);
}

static void encode_fetch(kp_writer *w)
{
    static kp_fetch_req_fetch_partition parts[FETCH_PARTITIONS];
    static kp_fetch_req_fetch_topic topic;
    kp_fetch_req rq;
    kp_fetch_req_defaults(&rq);
    kp_fetch_req_fetch_topic_defaults(&topic);
    for (int i = 0; i < FETCH_PARTITIONS; i++) {
        kp_fetch_req_fetch_partition_defaults(&parts[i]);
        parts[i].partition = i;
        parts[i].fetch_offset = 1000000 + i;
        parts[i].partition_max_bytes = 1048576;
    }
    memset(topic.topic_id.b, 7, sizeof(topic.topic_id.b));
    topic.partitions.n = FETCH_PARTITIONS;
    topic.partitions.v = parts;
    rq.max_wait_ms = 500;
    rq.min_bytes = 1;
    rq.topics.n = 1;
    rq.topics.v = &topic;
    kp_fetch_req_encode(w, &rq, FETCH_VERSION);
}

typedef kp_err decode_fn(kp_reader *r, kp_arena *a, void *out, int16_t v);

static kp_err decode_produce(kp_reader *r, kp_arena *a, void *out, int16_t v)
{
    return kp_produce_req_decode(r, a, out, v);
}

static kp_err decode_fetch(kp_reader *r, kp_arena *a, void *out, int16_t v)
{
    return kp_fetch_req_decode(r, a, out, v);
}

/* Best of 5 runs of rounds decodes, in ns per decode. */
static double measure(const kp_writer *w, decode_fn *fn, void *out, int16_t v, long rounds)
{
    kp_arena a;
    kp_arena_init(&a);
    double best = 0;
    for (int run = 0; run < 5; run++) {
        double t0 = now_ns();
        for (long i = 0; i < rounds; i++) {
            kp_reader r = kp_reader_make(w->buf, w->len);
            if (fn(&r, &a, out, v) != KP_ERR_NONE) {
                fprintf(stderr, "decode failed\n");
                exit(1);
            }
            kp_arena_reset(&a);
        }
        double per = (now_ns() - t0) / (double)rounds;
        if (run == 0 || per < best)
            best = per;
    }
    kp_arena_fini(&a);
    return best;
}

int main(int argc, char **argv)
{
    long rounds = argc > 1 ? atol(argv[1]) : 2000000;
    if (rounds <= 0)
        rounds = 1;
    kp_writer produce, fetch;
    kp_writer_init(&produce, 4096);
    kp_writer_init(&fetch, 4096);
    encode_produce(&produce);
    encode_fetch(&fetch);
    if (produce.err != KP_ERR_NONE || fetch.err != KP_ERR_NONE)
        return 1;
    kp_produce_req prq;
    kp_fetch_req frq;
    printf("produce_v%d_decode_ns %.1f (%zu bytes)\n", PRODUCE_VERSION,
           measure(&produce, decode_produce, &prq, PRODUCE_VERSION, rounds), produce.len);
    printf("fetch_v%d_decode_ns %.1f (%zu bytes)\n", FETCH_VERSION,
           measure(&fetch, decode_fetch, &frq, FETCH_VERSION, rounds), fetch.len);
    kp_writer_fini(&produce);
    kp_writer_fini(&fetch);
    return 0;
}
