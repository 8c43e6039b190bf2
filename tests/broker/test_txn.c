/* The transaction coordinator's state machine (kb_txn) driven through a
 * fake environment (records captured as bytes, markers counted, a fake
 * clock, injected write failures), and the per-partition transaction index
 * (kb_partition_txn): last stable offset, aborted transactions, markers. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_partition_txn.h"
#include "kb_txn.h"
#include "kp_batch.h"
#include "kp_records.h"

typedef struct fake {
    int64_t now;
    int64_t next_pid;
    bool fail_persist;
    bool fail_markers;
    int32_t persists;
    int32_t markers;       /* marker rounds written */
    bool last_commit;      /* of the last marker round */
    int16_t marker_epoch;  /* of the last marker round */
    int32_t marker_parts;  /* partitions in the last round */
    uint8_t key[256], value[1024];
    int32_t key_len, value_len; /* the last record written; value_len -1: tombstone */
} fake;

static kp_err f_persist(void *ctx, const char *id, const kb_txn_meta *m, const kb_txn_tp *parts,
                        int32_t n)
{
    fake *f = ctx;
    if (f->fail_persist)
        return KP_ERR__IO;
    kp_writer k, v;
    kp_arena a;
    kp_arena_init(&a);
    kp_writer_init(&k, 64);
    kp_writer_init(&v, 128);
    kb_txn_write_key(&k, id);
    kb_txn_write_value(&v, m, parts, n, &a);
    ck_assert(k.len <= sizeof(f->key) && v.len <= sizeof(f->value));
    memcpy(f->key, k.buf, k.len);
    memcpy(f->value, v.buf, v.len);
    f->key_len = (int32_t)k.len;
    f->value_len = (int32_t)v.len;
    kp_writer_fini(&k);
    kp_writer_fini(&v);
    kp_arena_fini(&a);
    f->persists++;
    return KP_ERR_NONE;
}

static kp_err f_tombstone(void *ctx, const char *id)
{
    (void)id;
    ((fake *)ctx)->value_len = -1;
    return KP_ERR_NONE;
}

static kp_err f_markers(void *ctx, const kb_txn *t, bool commit)
{
    fake *f = ctx;
    if (f->fail_markers)
        return KP_ERR__IO;
    f->markers++;
    f->last_commit = commit;
    f->marker_epoch = t->m.producer_epoch;
    f->marker_parts = t->nparts;
    return KP_ERR_NONE;
}

static kp_err f_new_pid(void *ctx, int64_t *pid)
{
    *pid = ((fake *)ctx)->next_pid++;
    return KP_ERR_NONE;
}

static int64_t f_wall(void *ctx)
{
    return ((fake *)ctx)->now;
}

static fake F;
static kb_txns *TS;
static const kp_str ID = KP_STR_LIT("tx-1");
static const kb_txn_tp TWO[] = {{"orders", 1}, {"orders", 0}, {"orders", 1}};

static void setup(void)
{
    memset(&F, 0, sizeof(F));
    F.now = 1000000;
    F.next_pid = 100;
    kb_txn_env env = {f_persist, f_tombstone, f_markers, f_new_pid, f_wall, &F, 60000,
                      7 * 86400000LL};
    TS = kb_txns_new(&env);
    ck_assert_ptr_nonnull(TS);
}

static void teardown(void)
{
    kb_txns_free(TS);
}

static int16_t init_ok(int32_t timeout, int64_t pid, int16_t epoch, int64_t *out_pid)
{
    int16_t out_epoch;
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, timeout, pid, epoch, out_pid, &out_epoch),
                     KP_ERR_NONE);
    return out_epoch;
}

START_TEST(test_txn_init_checks_and_first_epoch)
{
    int64_t pid;
    int16_t epoch;
    ck_assert_int_eq(kb_txn_init_producer(TS, KP_STR_LIT(""), 1000, -1, -1, &pid, &epoch),
                     KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, 0, -1, -1, &pid, &epoch),
                     KP_ERR_INVALID_TRANSACTION_TIMEOUT);
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, 60001, -1, -1, &pid, &epoch),
                     KP_ERR_INVALID_TRANSACTION_TIMEOUT);
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, 1000, 5, -1, &pid, &epoch),
                     KP_ERR_INVALID_REQUEST);
    ck_assert_int_eq(init_ok(1000, -1, -1, &pid), 0);
    ck_assert_int_eq(pid, 100);
    ck_assert_int_eq(init_ok(1000, -1, -1, &pid), 1); /* a restart of the producer */
    ck_assert_int_eq(pid, 100);
    const kb_txn *t = kb_txns_find(TS, ID);
    ck_assert_int_eq(t->m.state, KB_TXN_EMPTY);
    ck_assert_int_eq(F.persists, 2);
}
END_TEST

START_TEST(test_txn_commit_writes_markers_then_completes)
{
    int64_t pid;
    int16_t epoch = init_ok(5000, -1, -1, &pid);
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, true), KP_ERR_INVALID_TXN_STATE); /* Empty */
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 3), KP_ERR_NONE);
    const kb_txn *t = kb_txns_find(TS, ID);
    ck_assert_int_eq(t->m.state, KB_TXN_ONGOING);
    ck_assert_int_eq(t->nparts, 2); /* sorted, unique */
    ck_assert_int_eq(t->parts[0].partition, 0);
    ck_assert_int_eq(t->m.start_ms, F.now);
    ck_assert(kb_txn_has_partition(t, "orders", 1));
    ck_assert(!kb_txn_has_partition(t, "orders", 2));
    int32_t before = F.persists;
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 1), KP_ERR_NONE);
    ck_assert_int_eq(F.persists, before); /* nothing new: nothing written */
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, true), KP_ERR_NONE);
    ck_assert_int_eq(F.markers, 1);
    ck_assert(F.last_commit);
    ck_assert_int_eq(F.marker_parts, 2);
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_COMMIT);
    ck_assert_int_eq(t->nparts, 0);
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, true), KP_ERR_NONE); /* a retry */
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, false), KP_ERR_INVALID_TXN_STATE);
    ck_assert_int_eq(kb_txn_end(TS, ID, pid + 1, epoch, true), KP_ERR_INVALID_PRODUCER_ID_MAPPING);
    ck_assert_int_eq(kb_txn_end(TS, KP_STR_LIT("nope"), pid, epoch, true),
                     KP_ERR_INVALID_PRODUCER_ID_MAPPING);
}
END_TEST

START_TEST(test_txn_new_producer_fences_the_open_transaction)
{
    int64_t pid;
    int16_t old = init_ok(5000, -1, -1, &pid);
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, old, TWO, 2), KP_ERR_NONE);
    int64_t p2;
    int16_t e2;
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, 5000, -1, -1, &p2, &e2),
                     KP_ERR_CONCURRENT_TRANSACTIONS);
    ck_assert_int_eq(F.markers, 1);
    ck_assert(!F.last_commit);
    ck_assert_int_eq(F.marker_epoch, old + 1); /* aborted at a fenced epoch */
    ck_assert_int_eq(init_ok(5000, -1, -1, &p2), old + 2);
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, old, true), KP_ERR_PRODUCER_FENCED);
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, old, TWO, 1), KP_ERR_PRODUCER_FENCED);
    const kb_txn *t = kb_txns_find(TS, ID);
    ck_assert_int_eq(kb_txn_check_producer(t, pid, old), KP_ERR_PRODUCER_FENCED);
    ck_assert_int_eq(kb_txn_check_producer(t, pid + 7, old), KP_ERR_INVALID_PRODUCER_ID_MAPPING);
}
END_TEST

START_TEST(test_txn_kip360_epoch_bump)
{
    int64_t pid, p;
    int16_t e0 = init_ok(5000, -1, -1, &pid);
    ck_assert_int_eq(init_ok(5000, pid, e0, &p), e0 + 1); /* bump from the current epoch */
    ck_assert_int_eq(init_ok(5000, pid, e0, &p), e0 + 1); /* a retry: no second bump */
    int16_t e;
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, 5000, pid, 9, &p, &e), KP_ERR_PRODUCER_FENCED);
    ck_assert_int_eq(kb_txn_init_producer(TS, ID, 5000, pid + 3, 0, &p, &e),
                     KP_ERR_PRODUCER_FENCED);
}
END_TEST

START_TEST(test_txn_timeout_aborts_with_epoch_bump)
{
    int64_t pid;
    int16_t epoch = init_ok(1000, -1, -1, &pid);
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 2), KP_ERR_NONE);
    F.now += 999;
    ck_assert_int_eq(kb_txns_tick(TS), 0);
    F.now += 2;
    ck_assert_int_eq(kb_txns_tick(TS), 1);
    const kb_txn *t = kb_txns_find(TS, ID);
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_ABORT);
    ck_assert_int_eq(t->m.producer_epoch, epoch + 1);
    ck_assert(!F.last_commit);
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, true), KP_ERR_PRODUCER_FENCED);
}
END_TEST

START_TEST(test_txn_failed_writes_leave_state_or_retry)
{
    int64_t pid;
    int16_t epoch = init_ok(5000, -1, -1, &pid);
    F.fail_persist = true;
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 2),
                     KP_ERR_COORDINATOR_NOT_AVAILABLE);
    const kb_txn *t = kb_txns_find(TS, ID);
    ck_assert_int_eq(t->m.state, KB_TXN_EMPTY);
    ck_assert_int_eq(t->nparts, 0);
    F.fail_persist = false;
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 2), KP_ERR_NONE);
    F.fail_markers = true;
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, true), KP_ERR_NONE); /* PrepareCommit written */
    ck_assert_int_eq(t->m.state, KB_TXN_PREPARE_COMMIT);
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 1),
                     KP_ERR_CONCURRENT_TRANSACTIONS);
    F.fail_markers = false;
    kb_txns_tick(TS);
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_COMMIT);
    ck_assert(F.last_commit);
}
END_TEST

/* Loads the last record the fake wrote into another registry. */
static void load_last(kb_txns *into)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_str id;
    kp_transaction_log_value v;
    ck_assert_int_eq(kb_txn_read_key((kp_slice){F.key, F.key_len}, &a, &id), KP_ERR_NONE);
    ck_assert(kp_str_eq(id, ID));
    ck_assert_int_eq(kb_txn_read_value((kp_slice){F.value, F.value_len}, &a, &v), KP_ERR_NONE);
    ck_assert_int_eq(kb_txns_load(into, id, &v, &a), KP_ERR_NONE);
    kp_arena_fini(&a);
}

START_TEST(test_txn_records_rebuild_state)
{
    int64_t pid;
    int16_t epoch = init_ok(5000, -1, -1, &pid);
    ck_assert_int_eq(F.value[0], 0); /* value version 0 */
    ck_assert_int_eq(F.value[1], KB_TXN_VALUE_VERSION);
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 2), KP_ERR_NONE);
    F.fail_markers = true;
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, false), KP_ERR_NONE);
    F.fail_markers = false;
    kb_txn_env env = {f_persist, f_tombstone, f_markers, f_new_pid, f_wall, &F, 60000, 1000};
    kb_txns *again = kb_txns_new(&env);
    load_last(again);
    const kb_txn *t = kb_txns_find(again, ID);
    ck_assert_ptr_nonnull(t);
    ck_assert_int_eq(t->m.state, KB_TXN_PREPARE_ABORT);
    ck_assert_int_eq(t->m.producer_id, pid);
    ck_assert_int_eq(t->m.producer_epoch, epoch);
    ck_assert_int_eq(t->m.timeout_ms, 5000);
    ck_assert_int_eq(t->nparts, 2);
    ck_assert_str_eq(t->parts[1].topic, "orders");
    int32_t markers = F.markers;
    kb_txns_load_done(again); /* completes what the restart interrupted */
    ck_assert_int_eq(F.markers, markers + 1);
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_ABORT);
    F.now += 1000; /* transactional.id.expiration.ms 1000 in this registry */
    kb_txns_tick(again);
    ck_assert_ptr_null(kb_txns_find(again, ID));
    ck_assert_int_eq(F.value_len, -1);
    kb_txns_free(again);
}
END_TEST

/* ---- transactions v2 (KIP-890 part 2) ----------------------------------- */

static kp_err end_v2(int64_t pid, int16_t epoch, bool commit, int64_t *out_pid, int16_t *out_epoch)
{
    return kb_txn_end_tv(TS, ID, pid, epoch, commit, KB_TXN_TV2, out_pid, out_epoch);
}

START_TEST(test_txn_v2_every_end_bumps_the_epoch)
{
    int64_t pid, npid;
    int16_t epoch = init_ok(5000, -1, -1, &pid), nepoch;
    ck_assert_int_eq(kb_txn_add_partitions_tv(TS, ID, pid, epoch, TWO, 2, KB_TXN_TV2), KP_ERR_NONE);
    ck_assert_int_eq(end_v2(pid, epoch, true, &npid, &nepoch), KP_ERR_NONE);
    ck_assert_int_eq(npid, pid);
    ck_assert_int_eq(nepoch, epoch + 1);
    ck_assert_int_eq(F.marker_epoch, epoch + 1); /* the markers carry the bumped epoch */
    ck_assert(F.last_commit);
    const kb_txn *t = kb_txns_find(TS, ID);
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_COMMIT);
    ck_assert_int_eq(t->m.client_tv, KB_TXN_TV2);
    /* a retry with the old epoch gets the same answer; the other result does not */
    ck_assert_int_eq(end_v2(pid, epoch, true, &npid, &nepoch), KP_ERR_NONE);
    ck_assert_int_eq(nepoch, epoch + 1);
    ck_assert_int_eq(end_v2(pid, epoch, false, &npid, &nepoch), KP_ERR_INVALID_TXN_STATE);
    ck_assert_int_eq(end_v2(pid, (int16_t)(epoch - 1), true, &npid, &nepoch),
                     KP_ERR_PRODUCER_FENCED);
    /* the old epoch may no longer add or produce */
    ck_assert_int_eq(kb_txn_add_partitions_tv(TS, ID, pid, epoch, TWO, 1, KB_TXN_TV2),
                     KP_ERR_PRODUCER_FENCED);
    /* an abort with nothing added still bumps (and writes no marker) */
    int32_t rounds = F.markers;
    ck_assert_int_eq(end_v2(pid, (int16_t)(epoch + 1), false, &npid, &nepoch), KP_ERR_NONE);
    ck_assert_int_eq(nepoch, epoch + 2);
    ck_assert_int_eq(F.markers, rounds + 1);
    ck_assert_int_eq(F.marker_parts, 0);
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_ABORT);
    /* a commit with nothing added is still refused */
    ck_assert_int_eq(end_v2(pid, (int16_t)(epoch + 2), true, &npid, &nepoch),
                     KP_ERR_INVALID_TXN_STATE);
}
END_TEST

START_TEST(test_txn_v2_exhausted_epoch_hands_over_a_new_id)
{
    int64_t pid, npid;
    int16_t nepoch;
    (void)init_ok(5000, -1, -1, &pid);
    kb_txn *t = kb_txns_find(TS, ID);
    t->m.producer_epoch = INT16_MAX - 1; /* as after 32766 transactions */
    ck_assert_int_eq(kb_txn_add_partitions_tv(TS, ID, pid, INT16_MAX - 1, TWO, 2, KB_TXN_TV2),
                     KP_ERR_NONE);
    F.fail_markers = true; /* the handover waits for the markers */
    ck_assert_int_eq(end_v2(pid, INT16_MAX - 1, false, &npid, &nepoch), KP_ERR_NONE);
    ck_assert_int_eq(npid, 101);
    ck_assert_int_eq(nepoch, 0);
    ck_assert_int_eq(t->m.state, KB_TXN_PREPARE_ABORT);
    ck_assert_int_eq(t->m.producer_id, pid);
    ck_assert_int_eq(t->m.producer_epoch, INT16_MAX);
    ck_assert_int_eq(t->m.next_producer_id, 101);
    /* the Prepare record carries NextProducerId and ClientTransactionVersion */
    kb_txn_env env = {f_persist, f_tombstone, f_markers, f_new_pid, f_wall, &F, 60000, 1000};
    kb_txns *again = kb_txns_new(&env);
    load_last(again);
    const kb_txn *l = kb_txns_find(again, ID);
    ck_assert_int_eq(l->m.next_producer_id, 101);
    ck_assert_int_eq(l->m.client_tv, KB_TXN_TV2);
    kb_txns_free(again);
    F.fail_markers = false;
    kb_txns_tick(TS);
    ck_assert_int_eq(F.marker_epoch, INT16_MAX); /* the markers: the old id, the last epoch */
    ck_assert_int_eq(t->m.state, KB_TXN_COMPLETE_ABORT);
    ck_assert_int_eq(t->m.producer_id, 101);
    ck_assert_int_eq(t->m.producer_epoch, 0);
    ck_assert_int_eq(t->m.last_producer_id, pid);
    ck_assert_int_eq(t->m.next_producer_id, -1);
    /* a retry from the old id and epoch is answered with the new ones */
    ck_assert_int_eq(end_v2(pid, INT16_MAX - 1, false, &npid, &nepoch), KP_ERR_NONE);
    ck_assert_int_eq(npid, 101);
    ck_assert_int_eq(nepoch, 0);
    ck_assert_int_eq(kb_txn_add_partitions_tv(TS, ID, 101, 0, TWO, 1, KB_TXN_TV2), KP_ERR_NONE);
}
END_TEST

START_TEST(test_txn_v1_end_keeps_the_epoch)
{
    int64_t pid, npid;
    int16_t epoch = init_ok(5000, -1, -1, &pid), nepoch;
    ck_assert_int_eq(kb_txn_add_partitions(TS, ID, pid, epoch, TWO, 2), KP_ERR_NONE);
    ck_assert_int_eq(kb_txn_end_tv(TS, ID, pid, epoch, true, KB_TXN_TV1, &npid, &nepoch),
                     KP_ERR_NONE);
    ck_assert_int_eq(nepoch, epoch);
    ck_assert_int_eq(F.marker_epoch, epoch);
    /* an abort with nothing added is not a v1 request */
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, false), KP_ERR_INVALID_TXN_STATE);
    ck_assert_int_eq(kb_txn_end(TS, ID, pid, epoch, true), KP_ERR_NONE); /* a retry */
}
END_TEST

/* ---- kb_partition_txn ------------------------------------------------------------ */

START_TEST(test_ptxn_lso_and_aborted_ranges)
{
    kb_partition_txn *x = kb_partition_txn_new();
    ck_assert_int_eq(kb_partition_txn_lso(x, 30), 30);
    kb_partition_txn_on_data(x, 1, 10);
    kb_partition_txn_on_data(x, 2, 15);
    kb_partition_txn_on_data(x, 1, 18); /* same transaction: first offset stays 10 */
    ck_assert_int_eq(kb_partition_txn_lso(x, 30), 10);
    kb_partition_txn_on_marker(x, 1, true, 20);
    ck_assert_int_eq(kb_partition_txn_lso(x, 30), 15);
    kb_partition_txn_on_marker(x, 2, false, 25);
    kb_partition_txn_on_marker(x, 2, false, 26); /* nothing open: ignored */
    ck_assert_int_eq(kb_partition_txn_lso(x, 30), 30);
    ck_assert_int_eq(kb_partition_txn_open_count(x), 0);
    kb_aborted_txn out[4];
    ck_assert_int_eq(kb_partition_txn_aborted(x, 0, 30, out, 4), 1);
    ck_assert_int_eq(out[0].producer_id, 2);
    ck_assert_int_eq(out[0].first_offset, 15);
    ck_assert_int_eq(out[0].last_offset, 25);
    ck_assert_int_eq(kb_partition_txn_aborted(x, 25, 30, out, 4), 1);
    ck_assert_int_eq(kb_partition_txn_aborted(x, 26, 30, out, 4), 0); /* ended before */
    ck_assert_int_eq(kb_partition_txn_aborted(x, 0, 15, out, 4), 0);  /* starts after */
    kb_partition_txn_prune(x, 26);
    ck_assert_int_eq(kb_partition_txn_aborted_count(x), 0);
    kb_partition_txn_free(x);
}
END_TEST

START_TEST(test_ptxn_aborted_index_is_bounded)
{
    kb_partition_txn *x = kb_partition_txn_new();
    for (int64_t i = 0; i < KB_PARTITION_TXN_ABORTED_MAX + 100; i++) {
        ck_assert_int_eq(kb_partition_txn_on_data(x, 7, 2 * i), KP_ERR_NONE);
        ck_assert_int_eq(kb_partition_txn_on_marker(x, 7, false, 2 * i + 1), KP_ERR_NONE);
    }
    ck_assert_int_le(kb_partition_txn_aborted_count(x), KB_PARTITION_TXN_ABORTED_MAX);
    kb_aborted_txn last;
    int64_t end = 2 * (int64_t)(KB_PARTITION_TXN_ABORTED_MAX + 100);
    ck_assert_int_eq(kb_partition_txn_aborted(x, end - 1, end, &last, 1), 1); /* newest kept */
    ck_assert_int_eq(last.first_offset, end - 2);
    kb_partition_txn_free(x);
}
END_TEST

static uint8_t *marker(int type, size_t *len)
{
    uint8_t key[4] = {0, 0, 0, (uint8_t)type}, value[6] = {0, 0, 0, 0, 0, 7}; /* epoch 7 */
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 40, KP_BATCH_ATTR_TRANSACTIONAL | KP_BATCH_ATTR_CONTROL, 9, 3, -1);
    kp_batch_builder_add(&bb, 1, (kp_slice){key, 4}, (kp_slice){value, 6}, NULL, 0);
    uint8_t *b = kp_batch_builder_finish(&bb, len);
    kp_batch_builder_fini(&bb);
    return b;
}

START_TEST(test_ptxn_replays_markers_from_batches)
{
    kb_partition_txn *x = kb_partition_txn_new();
    size_t len;
    uint8_t *abort = marker(KB_CONTROL_ABORT, &len);
    int16_t type = -1;
    ck_assert_int_eq(kb_partition_txn_control_type(abort, len, &type), KP_ERR_NONE);
    ck_assert_int_eq(type, KB_CONTROL_ABORT);
    int32_t coordinator_epoch = -1;
    ck_assert_int_eq(kb_partition_txn_marker(abort, len, &type, &coordinator_epoch), KP_ERR_NONE);
    ck_assert_int_eq(coordinator_epoch, 7);
    kp_batch_hdr data = {.base_offset = 30, .attributes = KP_BATCH_ATTR_TRANSACTIONAL,
                         .producer_id = 9, .records_count = 1};
    ck_assert_int_eq(kb_partition_txn_replay(x, &data, NULL, 0), KP_ERR_NONE);
    ck_assert_int_eq(kb_partition_txn_lso(x, 100), 30);
    kp_batch_hdr h;
    ck_assert_int_eq(kp_batch_hdr_parse(abort, len, &h), KP_ERR_NONE);
    ck_assert_int_eq(kb_partition_txn_replay(x, &h, abort, len), KP_ERR_NONE);
    ck_assert_int_eq(kb_partition_txn_lso(x, 100), 100);
    ck_assert_int_eq(kb_partition_txn_aborted_count(x), 1);
    ck_assert_int_eq(kb_partition_txn_control_type(abort, 20, &type), KP_ERR__CORRUPT);
    free(abort);
    kb_partition_txn_free(x);
}
END_TEST

Suite *txn_suite(void)
{
    Suite *s = suite_create("txn");
    TCase *tc = tcase_create("coordinator");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_txn_init_checks_and_first_epoch);
    tcase_add_test(tc, test_txn_commit_writes_markers_then_completes);
    tcase_add_test(tc, test_txn_new_producer_fences_the_open_transaction);
    tcase_add_test(tc, test_txn_kip360_epoch_bump);
    tcase_add_test(tc, test_txn_timeout_aborts_with_epoch_bump);
    tcase_add_test(tc, test_txn_failed_writes_leave_state_or_retry);
    tcase_add_test(tc, test_txn_records_rebuild_state);
    tcase_add_test(tc, test_txn_v2_every_end_bumps_the_epoch);
    tcase_add_test(tc, test_txn_v2_exhausted_epoch_hands_over_a_new_id);
    tcase_add_test(tc, test_txn_v1_end_keeps_the_epoch);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("partition");
    tcase_add_test(tp, test_ptxn_lso_and_aborted_ranges);
    tcase_add_test(tp, test_ptxn_aborted_index_is_bounded);
    tcase_add_test(tp, test_ptxn_replays_markers_from_batches);
    suite_add_tcase(s, tp);
    return s;
}
