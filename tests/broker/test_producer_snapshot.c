/* Producer-state snapshots: Kafka's .snapshot encoding, hostile files
 * rejected, and the open path loading a snapshot then scanning the tail. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_producer_snapshot.h"
#include "kp_batch.h"
#include "kp_crc32c.h"
#include "kp_records.h"
#include "ks_log.h"

static const kb_producer_snapshot_entry sample[] = {
    {42, 3, 99, 1234, 4, 1700000000000LL, -1, -1},
    {7, 0, INT32_MAX, 50, 9, 5, 12, 41},
    {0, 32767, 2, 2, 2, -1, 0, 0},
};
#define NSAMPLE ((int32_t)(sizeof(sample) / sizeof(sample[0])))

static void assert_entries(const kb_producer_snapshot_entry *got, const kb_producer_snapshot_entry *want, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        ck_assert_int_eq(got[i].producer_id, want[i].producer_id);
        ck_assert_int_eq(got[i].epoch, want[i].epoch);
        ck_assert_int_eq(got[i].last_seq, want[i].last_seq);
        ck_assert_int_eq(got[i].last_offset, want[i].last_offset);
        ck_assert_int_eq(got[i].offset_delta, want[i].offset_delta);
        ck_assert_int_eq(got[i].timestamp, want[i].timestamp);
        ck_assert_int_eq(got[i].coordinator_epoch, want[i].coordinator_epoch);
        ck_assert_int_eq(got[i].txn_first_offset, want[i].txn_first_offset);
    }
}

START_TEST(test_pidsnap_round_trip)
{
    size_t len;
    uint8_t *buf = kb_producer_snapshot_encode(sample, NSAMPLE, &len);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(len, KB_PRODUCER_SNAPSHOT_HDR_SIZE + 3 * KB_PRODUCER_SNAPSHOT_ENTRY_SIZE);
    /* version 1, then the CRC-32C of everything after it, then the count */
    ck_assert_int_eq(buf[0], 0);
    ck_assert_int_eq(buf[1], 1);
    ck_assert_uint_eq((uint32_t)kp_be32_get(buf + 2), kp_crc32c(0, buf + 6, len - 6));
    ck_assert_int_eq(kp_be32_get(buf + 6), 3);
    /* the first entry's fields in Kafka's order */
    const uint8_t *e = buf + KB_PRODUCER_SNAPSHOT_HDR_SIZE;
    ck_assert_int_eq(kp_be64_get(e), 42);
    ck_assert_int_eq(e[9], 3);
    ck_assert_int_eq(kp_be32_get(e + 10), 99);
    ck_assert_int_eq(kp_be64_get(e + 14), 1234);
    ck_assert_int_eq(kp_be32_get(e + 22), 4);
    ck_assert_int_eq(kp_be64_get(e + 26), 1700000000000LL);
    ck_assert_int_eq(kp_be32_get(e + 34), -1);
    ck_assert_int_eq(kp_be64_get(e + 38), -1);
    kb_producer_snapshot_entry *v;
    int32_t n;
    ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR_NONE);
    ck_assert_int_eq(n, NSAMPLE);
    assert_entries(v, sample, NSAMPLE);
    free(v);
    free(buf);
    /* no producers: a 10-byte file */
    buf = kb_producer_snapshot_encode(NULL, 0, &len);
    ck_assert_uint_eq(len, KB_PRODUCER_SNAPSHOT_HDR_SIZE);
    ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR_NONE);
    ck_assert_int_eq(n, 0);
    free(buf);
}
END_TEST

START_TEST(test_pidsnap_rejects_bad_files)
{
    size_t len;
    uint8_t *buf = kb_producer_snapshot_encode(sample, NSAMPLE, &len);
    kb_producer_snapshot_entry *v;
    int32_t n;
    /* every truncation */
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(kb_producer_snapshot_decode(buf, cut, &v, &n), KP_ERR__CORRUPT);
    /* a flipped bit anywhere */
    for (size_t i = 0; i < len; i++) {
        buf[i] ^= 0x10;
        ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR__CORRUPT);
        buf[i] ^= 0x10;
    }
    /* a huge (or negative) count with a valid CRC */
    int32_t counts[] = {INT32_MAX, 0x7ffffff0, -1, 4, 2, 0};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        kp_be32_put(buf + 6, counts[i]);
        kp_be32_put(buf + 2, (int32_t)kp_crc32c(0, buf + 6, len - 6));
        ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR__CORRUPT);
    }
    /* another version with a valid CRC */
    kp_be32_put(buf + 6, NSAMPLE);
    buf[1] = 2;
    kp_be32_put(buf + 2, (int32_t)kp_crc32c(0, buf + 6, len - 6));
    ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR__CORRUPT);
    buf[1] = 1;
    /* a negative producer id, CRC right */
    kp_be64_put(buf + KB_PRODUCER_SNAPSHOT_HDR_SIZE, -5);
    kp_be32_put(buf + 2, (int32_t)kp_crc32c(0, buf + 6, len - 6));
    ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR__CORRUPT);
    free(buf);
    /* the companion: round trip, then out-of-order entries */
    kb_aborted_txn ab[] = {{5, 10, 20}, {6, 15, 30}};
    buf = kb_producer_snapshot_encode_aborted(ab, 2, &len);
    kb_aborted_txn *a;
    ck_assert_int_eq(kb_producer_snapshot_decode_aborted(buf, len, &a, &n), KP_ERR_NONE);
    ck_assert_int_eq(n, 2);
    ck_assert_mem_eq(a, ab, sizeof(ab));
    free(a);
    ck_assert_int_eq(kb_producer_snapshot_decode_aborted(buf, len - 1, &a, &n), KP_ERR__CORRUPT);
    ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR__CORRUPT); /* version 0 */
    free(buf);
    kb_aborted_txn bad[] = {{5, 10, 30}, {6, 15, 20}};
    buf = kb_producer_snapshot_encode_aborted(bad, 2, &len);
    ck_assert_int_eq(kb_producer_snapshot_decode_aborted(buf, len, &a, &n), KP_ERR__CORRUPT);
    free(buf);
}
END_TEST

/* ---- against a real log -------------------------------------------------- */

typedef struct fixture {
    char dir[64];
    ks_io io;
    ks_log *log;
} fixture;

static void fx_open(fixture *fx)
{
    ks_log_config cfg;
    ks_log_config_default(&cfg);
    ks_log_open_args args = {-1, -1, false, 1000};
    ck_assert_int_eq(ks_log_open(&fx->io, fx->dir, "t", 0, &cfg, &args, &fx->log, NULL, NULL),
                     KP_ERR_NONE);
}

static void fx_init(fixture *fx)
{
    strcpy(fx->dir, "/tmp/runnel-pidsnap-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(fx->dir));
    fx->io = ks_io_posix();
    fx_open(fx);
}

/* Snapshots are not segments: ks_log_delete leaves them, as the broker's
 * topic deletion does (its directory removal takes them). */
static void fx_fini(fixture *fx)
{
    (void)ks_log_delete(fx->log, NULL);
    char d[128];
    snprintf(d, sizeof(d), "%s/t-0", fx->dir);
    DIR *dir = opendir(d);
    struct dirent *e;
    while (dir != NULL && (e = readdir(dir)) != NULL) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
        if (e->d_name[0] != '.')
            unlink(p);
    }
    if (dir != NULL)
        closedir(dir);
    (void)rmdir(d);
    ck_assert(access(d, F_OK) != 0);
    ck_assert_int_eq(rmdir(fx->dir), 0);
}

/* Appends one batch of n records and records it, as the produce path does. */
static void produce(fixture *fx, kb_producer_state *ps, int64_t pid, int32_t seq, int n)
{
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, 0, pid, 0, seq);
    for (int i = 0; i < n; i++)
        kp_batch_builder_add(&bb, 1000 + seq + i, (kp_slice){(const uint8_t *)"k", 1},
                             (kp_slice){(const uint8_t *)"v", 1}, NULL, 0);
    size_t len;
    uint8_t *batch = kp_batch_builder_finish(&bb, &len);
    kp_batch_builder_fini(&bb);
    ks_append_result res;
    ck_assert_int_eq(ks_log_append(fx->log, batch, len, 0, 1000, &res, NULL), KP_ERR_NONE);
    free(batch);
    kb_pid_batch b = {seq, seq + n - 1, res.base_offset, res.last_offset, 1000 + seq + n - 1};
    ck_assert_int_eq(kb_producer_state_record(ps, pid, 0, &b), KP_ERR_NONE);
}

/* A new log holding batches batches of 4 records of producer pid (sequence
 * = offset), and the state they make. */
static kb_producer_state *fill(fixture *fx, int64_t pid, int32_t batches)
{
    fx_init(fx);
    kb_producer_state *ps = kb_producer_state_new();
    for (int32_t s = 0; s < batches * 4; s += 4)
        produce(fx, ps, pid, s, 4);
    return ps;
}

/* Frees ps and loads a new state from the log directory, as an open does. */
static kb_producer_state *reopen(fixture *fx, kb_producer_state *ps, kb_producer_snapshot_report *rep)
{
    kb_producer_state_free(ps);
    ps = kb_producer_state_new();
    ck_assert_int_eq(kb_producer_snapshot_restore(&fx->io, fx->log, ps, rep), KP_ERR_NONE);
    return ps;
}

static char *snap_path(const fixture *fx, int64_t offset, char *buf, size_t cap)
{
    char name[KB_PRODUCER_SNAPSHOT_NAME_MAX];
    kb_producer_snapshot_name(offset, name);
    snprintf(buf, cap, "%s/t-0/%s", fx->dir, name);
    return buf;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

START_TEST(test_pidsnap_restore_reads_only_the_tail)
{
    fixture fx;
    kb_producer_state *ps = fill(&fx, 42, 100);
    ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, 400, NULL), KP_ERR_NONE);
    char path[4096];
    ck_assert(exists(snap_path(&fx, 400, path, sizeof(path))));
    ck_assert_str_eq(strrchr(path, '/') + 1, "00000000000000000400.snapshot");
    for (int32_t s = 400; s < 412; s += 4)
        produce(&fx, ps, 42, s, 4); /* 3 more batches after the snapshot */
    kb_producer_snapshot_report rep;
    ps = reopen(&fx, ps, &rep);
    ck_assert_int_eq(rep.snapshot_offset, 400);
    ck_assert_int_eq(rep.producers, 1);
    ck_assert_int_eq(rep.batches_scanned, 3);
    kb_pid_batch dup;
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 0, 408, 411, &dup),
                     KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(dup.first_offset, 408);
    /* as Kafka after a restart: only the last batch is known */
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 0, 404, 407, &dup),
                     KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 0, 396, 399, &dup),
                     KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 42, 0, 412, 415, &dup), KP_ERR_NONE);
    kb_producer_state_free(ps);
    fx_fini(&fx);
}
END_TEST

START_TEST(test_pidsnap_keeps_only_the_last_batch)
{
    /* as Kafka: after a load only the snapshot's batch is a known duplicate */
    fixture fx;
    kb_producer_state *ps = fill(&fx, 9, 5);
    ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, 20, NULL), KP_ERR_NONE);
    kb_producer_snapshot_report rep;
    ps = reopen(&fx, ps, &rep);
    ck_assert_int_eq(rep.batches_scanned, 0);
    kb_pid_batch dup;
    ck_assert_int_eq(kb_producer_state_check(ps, 9, 0, 16, 19, &dup), KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(dup.first_offset, 16);
    ck_assert_int_eq(dup.last_offset, 19);
    ck_assert_int_eq(kb_producer_state_check(ps, 9, 0, 12, 15, &dup),
                     KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 9, 0, 21, 21, &dup),
                     KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 9, 0, 20, 20, &dup), KP_ERR_NONE);
    kb_pid_info info;
    ck_assert(kb_producer_state_at(ps, 0, &info));
    ck_assert_int_eq(info.last_timestamp, 1019);
    kb_producer_state_free(ps);
    fx_fini(&fx);
}
END_TEST

static void write_bytes(const char *path, const void *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    fclose(f);
}

START_TEST(test_pidsnap_bad_file_falls_back_to_scan)
{
    fixture fx;
    kb_producer_state *ps = fill(&fx, 5, 10);
    ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, 20, NULL), KP_ERR_NONE);
    ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, 40, NULL), KP_ERR_NONE);
    char p40[4096], p20[4096], p99[4096];
    snap_path(&fx, 40, p40, sizeof(p40));
    snap_path(&fx, 20, p20, sizeof(p20));
    write_bytes(p40, "\0\1garbage", 9);                     /* truncated, bad crc */
    uint8_t huge[KB_PRODUCER_SNAPSHOT_HDR_SIZE] = {0, 1, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff};
    kp_be32_put(huge + 2, (int32_t)kp_crc32c(0, huge + 6, 4));
    write_bytes(p20, huge, sizeof(huge));                   /* count 2^31-1, crc fine */
    write_bytes(snap_path(&fx, 99, p99, sizeof(p99)), "x", 1); /* above the log end */
    kb_producer_snapshot_report rep;
    ps = reopen(&fx, ps, &rep);
    ck_assert_int_eq(rep.snapshot_offset, -1);
    ck_assert_int_eq(rep.batches_scanned, 10);
    ck_assert_int_eq(rep.deleted, 3);
    ck_assert(!exists(p40) && !exists(p20) && !exists(p99));
    kb_pid_batch dup;
    ck_assert_int_eq(kb_producer_state_check(ps, 5, 0, 36, 39, &dup), KP_ERR_DUPLICATE_SEQUENCE_NUMBER);
    ck_assert_int_eq(kb_producer_state_check(ps, 5, 0, 40, 40, &dup), KP_ERR_NONE);
    kb_producer_state_free(ps);
    fx_fini(&fx);
}
END_TEST

START_TEST(test_pidsnap_kafka_dir_with_aborted_is_scanned)
{
    /* Kafka keeps aborted transactions in .txnindex, which Runnel does not
     * read: its snapshot (no .aborted companion) would lose them */
    fixture fx;
    kb_producer_state *ps = fill(&fx, 5, 3);
    ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, 12, NULL), KP_ERR_NONE);
    char p[4096];
    snprintf(p, sizeof(p), "%s/t-0/00000000000000000000.txnindex", fx.dir);
    write_bytes(p, "", 0);
    kb_producer_snapshot_report rep;
    ps = reopen(&fx, ps, &rep);
    ck_assert_int_eq(rep.snapshot_offset, -1);
    ck_assert_int_eq(rep.batches_scanned, 3);
    ck_assert(exists(snap_path(&fx, 12, p, sizeof(p)))); /* not bad: kept */
    kb_producer_state_free(ps);
    fx_fini(&fx);
}
END_TEST

static int count_snapshots(const fixture *fx)
{
    char d[4096];
    snprintf(d, sizeof(d), "%s/t-0", fx->dir);
    DIR *dir = opendir(d);
    ck_assert_ptr_nonnull(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL)
        n += strstr(e->d_name, ".snapshot") != NULL;
    closedir(dir);
    return n;
}

START_TEST(test_pidsnap_keeps_a_few)
{
    fixture fx;
    fx_init(&fx);
    kb_producer_state *ps = kb_producer_state_new();
    for (int32_t s = 0; s < 24; s += 4) {
        produce(&fx, ps, 5, s, 4);
        ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, s + 4, NULL), KP_ERR_NONE);
    }
    ck_assert_int_eq(count_snapshots(&fx), KB_PRODUCER_SNAPSHOT_KEEP);
    char p[4096];
    ck_assert(exists(snap_path(&fx, 24, p, sizeof(p))));
    ck_assert(!exists(snap_path(&fx, 12, p, sizeof(p))));
    /* retention: below the log start none is usable any more */
    ck_assert_int_eq(ks_log_advance_start(fx.log, 21, NULL), KP_ERR_NONE);
    kb_producer_snapshot_prune(&fx.io, fx.log);
    ck_assert_int_eq(count_snapshots(&fx), 1);
    ck_assert(exists(snap_path(&fx, 24, p, sizeof(p))));
    kb_producer_state_free(ps);
    fx_fini(&fx);
}
END_TEST

START_TEST(test_pidsnap_transactions_survive)
{
    fixture fx;
    fx_init(&fx);
    kb_producer_state *ps = kb_producer_state_new();
    produce(&fx, ps, 3, 0, 2); /* offsets 0-1: an aborted transaction */
    produce(&fx, ps, 4, 0, 2); /* offsets 2-3: an open one */
    kb_partition_txn *x = kb_producer_state_txns(ps);
    ck_assert_int_eq(kb_partition_txn_on_data(x, 3, 0), KP_ERR_NONE);
    ck_assert_int_eq(kb_partition_txn_on_marker(x, 3, false, 5), KP_ERR_NONE);
    kb_producer_state_on_marker(ps, 3, 7777, 6);
    ck_assert_int_eq(kb_partition_txn_on_data(x, 4, 2), KP_ERR_NONE);
    produce(&fx, ps, 5, 0, 2); /* offsets 4-5 */
    ck_assert_int_eq(kb_producer_snapshot_write(&fx.io, fx.log, ps, 6, NULL), KP_ERR_NONE);
    kb_producer_snapshot_report rep;
    ps = reopen(&fx, ps, &rep);
    ck_assert_int_eq(rep.snapshot_offset, 6);
    ck_assert_int_eq(rep.producers, 3);
    x = kb_producer_state_txns(ps);
    int64_t first = -1;
    ck_assert(kb_partition_txn_open(x, 4, &first));
    ck_assert_int_eq(first, 2);
    ck_assert(!kb_partition_txn_open(x, 3, NULL));
    ck_assert_int_eq(kb_partition_txn_lso(x, 6), 2);
    kb_aborted_txn a[2];
    ck_assert_int_eq(kb_partition_txn_aborted(x, 0, 6, a, 2), 1);
    ck_assert_int_eq(a[0].producer_id, 3);
    ck_assert_int_eq(a[0].first_offset, 0);
    ck_assert_int_eq(a[0].last_offset, 5);
    for (int32_t i = 0; i < kb_producer_state_count(ps); i++) {
        kb_pid_info info;
        ck_assert(kb_producer_state_at(ps, i, &info));
        if (info.producer_id == 3) {
            ck_assert_int_eq(info.last_timestamp, 7777);
            ck_assert_int_eq(info.coordinator_epoch, 6);
        }
    }
    kb_producer_state_free(ps);
    fx_fini(&fx);
}
END_TEST

/* A file Kafka 4.1 wrote (integration/test_producer_snapshot.py --target=kafka,
 * after a kill -9: the snapshot it takes of the recovered log end). */
START_TEST(test_pidsnap_reads_kafkas_file)
{
    ks_io io = ks_io_posix();
    kb_producer_snapshot_entry *v;
    int32_t n;
    ck_assert_int_eq(kb_producer_snapshot_read(&io, KT_DATA_DIR "/pidsnap", 3010, &v, &n, NULL),
                     KP_ERR__NOENT); /* named with a prefix: not found by offset */
    FILE *f = fopen(KT_DATA_DIR "/pidsnap/kafka-4.1-00000000000000003010.snapshot", "rb");
    ck_assert_ptr_nonnull(f);
    uint8_t buf[256];
    size_t len = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    ck_assert_uint_eq(len, 102);
    ck_assert_int_eq(kb_producer_snapshot_decode(buf, len, &v, &n), KP_ERR_NONE);
    ck_assert_int_eq(n, 2);
    kb_producer_snapshot_entry want[] = {
        {1000, 0, 2999, 2999, 9, 0x01a23794b420LL, -1, -1},
        {1001, 0, 9, 3009, 1, 0x01a23794bbc1LL, -1, -1},
    };
    assert_entries(v, want, 2);
    /* and Runnel encodes the same entries to the same bytes */
    size_t elen;
    uint8_t *enc = kb_producer_snapshot_encode(v, n, &elen);
    ck_assert_uint_eq(elen, len);
    ck_assert_mem_eq(enc, buf, len);
    free(enc);
    free(v);
}
END_TEST

Suite *pidsnap_suite(void)
{
    Suite *s = suite_create("pidsnap");
    TCase *tc = tcase_create("pidsnap");
    tcase_add_test(tc, test_pidsnap_round_trip);
    tcase_add_test(tc, test_pidsnap_rejects_bad_files);
    tcase_add_test(tc, test_pidsnap_reads_kafkas_file);
    tcase_add_test(tc, test_pidsnap_restore_reads_only_the_tail);
    tcase_add_test(tc, test_pidsnap_keeps_only_the_last_batch);
    tcase_add_test(tc, test_pidsnap_bad_file_falls_back_to_scan);
    tcase_add_test(tc, test_pidsnap_keeps_a_few);
    tcase_add_test(tc, test_pidsnap_kafka_dir_with_aborted_is_scanned);
    tcase_add_test(tc, test_pidsnap_transactions_survive);
    suite_add_tcase(s, tc);
    return s;
}
