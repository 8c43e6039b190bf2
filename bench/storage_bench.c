/*
 * storage_bench: append throughput and recovery time of the storage engine.
 *
 * Usage: storage_bench DIR TOTAL_MIB
 * Prints one line per measurement, "key=value" pairs:
 *   append batch_kib=16 sync=0 mib=... mb_per_s=...
 *   recover gib=... seconds=... s_per_gib=...
 * Appends batches of 1 KiB records (the record bytes are filler: storage
 * never parses records) to topic bench-0 in DIR, with sync=1 meaning one
 * ks_log_flush (fdatasync) after every append, as an acks=-1 producer
 * with one batch in flight would see, and final_sync=1 one flush at the end
 * (timed), to compare with dd conv=fdatasync. DIR is emptied between runs by
 * bench/storage.sh. A benchmark, not a test: it never fails on speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kp_batch.h"
#include "ks_log.h"

#define RECORD_BYTES 1024

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A v2 batch of total bytes holding total/1KiB records of filler. */
static uint8_t *make_batch(size_t total)
{
    uint8_t *b = calloc(1, total);
    if (b == NULL)
        return NULL;
    int32_t records = (int32_t)(total / RECORD_BYTES);
    memset(b + KP_BATCH_HDR_SIZE, 'x', total - KP_BATCH_HDR_SIZE);
    kp_be32_put(b + KP_BATCH_OFF_LENGTH, (int32_t)(total - KP_BATCH_LOG_OVERHEAD));
    kp_be32_put(b + KP_BATCH_OFF_LEADER_EPOCH, -1);
    b[KP_BATCH_OFF_MAGIC] = KP_BATCH_MAGIC;
    kp_be32_put(b + KP_BATCH_OFF_LAST_DELTA, records - 1);
    kp_be64_put(b + 43, -1);
    kp_be32_put(b + 57, records);
    kp_batch_crc_store(b, total);
    return b;
}

static ks_log *open_log(const char *dir, bool clean, kp_err *err)
{
    ks_io io = ks_io_posix();
    ks_log_config cfg;
    ks_log_config_default(&cfg);
    cfg.retention_ms = -1;
    ks_log_open_args args = {.recovery_point = 0, .log_start_offset = -1,
                             .clean_shutdown = clean, .now_ms = 0};
    ks_log *log = NULL;
    kp_errctx ctx = {0};
    *err = ks_log_open(&io, dir, "bench", 0, &cfg, &args, &log, NULL, &ctx);
    if (*err != KP_ERR_NONE)
        fprintf(stderr, "open: %s %s\n", kp_err_name(*err), ctx.msg);
    return log;
}

static int run_append(const char *dir, size_t batch, int64_t total_bytes, bool sync,
                      bool final_sync)
{
    kp_err err;
    ks_log *log = open_log(dir, false, &err);
    uint8_t *b = make_batch(batch);
    if (log == NULL || b == NULL)
        return 1;
    int64_t n = total_bytes / (int64_t)batch;
    double t0 = now_s();
    for (int64_t i = 0; i < n && err == KP_ERR_NONE; i++) {
        err = ks_log_append(log, b, batch, 0, 1000, NULL, NULL);
        if (err == KP_ERR_NONE && sync)
            err = ks_log_flush(log, 1000, NULL);
    }
    if (err == KP_ERR_NONE && final_sync)
        err = ks_log_flush(log, 1000, NULL);
    double dt = now_s() - t0;
    double mib = (double)(n * (int64_t)batch) / 1048576.0;
    printf("append batch_kib=%zu sync=%d final_sync=%d mib=%.0f seconds=%.3f mb_per_s=%.1f\n",
           batch / 1024, sync ? 1 : 0, final_sync ? 1 : 0, mib, dt, mib * 1.048576 / dt);
    free(b);
    if (ks_log_close(log, NULL) != KP_ERR_NONE || err != KP_ERR_NONE)
        return 1;
    return 0;
}

/* Reopens the log left by the last run as after a crash: full scan. */
static int run_recover(const char *dir)
{
    kp_err err;
    double t0 = now_s();
    ks_log *log = open_log(dir, false, &err);
    double dt = now_s() - t0;
    if (log == NULL)
        return 1;
    double gib = (double)ks_log_size(log) / 1073741824.0;
    printf("recover gib=%.3f seconds=%.3f s_per_gib=%.3f\n", gib, dt, gib > 0 ? dt / gib : 0);
    return ks_log_close(log, NULL) != KP_ERR_NONE;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s DIR TOTAL_MIB append16|append1m|final1m|sync16|sync1m|recover\n",
                argv[0]);
        return 2;
    }
    int64_t total = (int64_t)atoll(argv[2]) << 20;
    const char *mode = argv[3];
    if (strcmp(mode, "recover") == 0)
        return run_recover(argv[1]);
    bool sync = strncmp(mode, "sync", 4) == 0;
    size_t batch = strstr(mode, "1m") != NULL ? (size_t)1 << 20 : (size_t)16 << 10;
    return run_append(argv[1], batch, total, sync, strncmp(mode, "final", 5) == 0);
}
