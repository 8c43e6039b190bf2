/*
 * kt_storage: helpers for the storage tests.
 *
 * Job: a fault-injecting ks_io (ENOSPC / EIO after a byte budget, short
 * writes, crash after N bytes, failing fdatasync), temp directories under
 * /tmp, and small builders for logs and batches.
 * Ownership: kt_faultio is caller-embedded; kt_tmpdir returns a static-free
 * malloc'd path freed by kt_rmtree_free.
 * Threading: kt_faultio counters are guarded by a mutex (the flush thread
 * uses the same ks_io).
 * Errors: helpers abort the test (ck_assert) on unexpected failures.
 */
#ifndef KT_STORAGE_H
#define KT_STORAGE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ks_io.h"
#include "ks_log.h"

typedef struct kt_faultio {
    ks_io io;             /* hand this to storage */
    ks_io base;           /* the real file system */
    pthread_mutex_t mu;
    int64_t write_budget; /* bytes pwrite may still write; -1 = no limit */
    int write_errno;      /* error once the budget is spent */
    bool crash;           /* budget spent: every later write fails too */
    size_t short_max;     /* > 0: each pwrite moves at most this many bytes */
    int sync_errno;       /* fdatasync fails with this when non-zero */
    int64_t syncs;        /* fdatasync calls seen */
    bool gate_closed;     /* fdatasync blocks while true */
    int waiting;          /* fdatasync calls blocked at the gate */
    pthread_cond_t cv;
} kt_faultio;

void kt_faultio_init(kt_faultio *f);
void kt_faultio_fini(kt_faultio *f);
void kt_faultio_set(kt_faultio *f, int64_t budget, int write_errno, bool crash);
void kt_faultio_set_sync(kt_faultio *f, int sync_errno);
/* Closes or opens the fdatasync gate; wait_blocked waits for n blocked. */
void kt_faultio_gate(kt_faultio *f, bool closed);
void kt_faultio_wait_blocked(kt_faultio *f, int n);

/* Check fixture: a fresh temp dir per test (kt_dir), removed after. */
void kt_fixture_setup(void);
void kt_fixture_teardown(void);
const char *kt_dir(void);
/* The fixture's fault-injecting file system (no faults until set). */
kt_faultio *kt_fio(void);
/* The real file system, as a pointer for the tests' convenience. */
const ks_io *kt_io(void);

/* mkdtemp under /tmp; kt_rmtree removes it recursively and frees it. */
char *kt_tmpdir(void);
void kt_rmtree(char *dir);

/* A small-segment config for tests. */
void kt_small_config(ks_log_config *cfg, int64_t segment_bytes, int32_t index_interval);

/* Opens topic "t" partition 0 in dir; asserts success. */
ks_log *kt_open(const ks_io *io, const char *dir, const ks_log_config *cfg, bool clean,
                int64_t recovery_point, ks_recover_report *rep);

/* Appends a batch of n records with value_len bytes each; asserts success
 * and returns the base offset. */
int64_t kt_append(ks_log *log, int32_t n, size_t value_len, int64_t ts, int64_t now_ms);

/* Reads size bytes at off of fd (pread), asserting success. */
void kt_pread(int fd, void *buf, size_t size, int64_t off);

#endif

/* What the tests appended: one record per batch, in log order. */
typedef struct kt_batch_rec {
    int64_t base;   /* first offset */
    int64_t last;   /* last offset */
    int64_t max_ts; /* max timestamp */
    int32_t len;    /* bytes */
} kt_batch_rec;

typedef struct kt_model {
    kt_batch_rec *v;
    int32_t n;
    int32_t cap;
} kt_model;

/* Appends batches of 1-5 records of 1-300 bytes with pseudo-random
 * timestamps (seeded), recording each in m. */
void kt_model_fill(ks_log *log, kt_model *m, int32_t batches, int64_t now_ms, unsigned seed);
/* Appends one batch and records it in m when the append succeeds. */
kp_err kt_model_try(ks_log *log, kt_model *m, int32_t nrec, size_t vlen, int64_t ts,
                    int64_t now_ms, kp_errctx *ctx);
void kt_model_free(kt_model *m);
/* Index in m of the batch holding offset, -1 if none. */
int32_t kt_model_find(const kt_model *m, int64_t offset);
/* Asserts that a read at every offset of m's first n batches returns that
 * whole batch (max_bytes 1), with intact bytes. */
void kt_check_reads(ks_log *log, const kt_model *m, int32_t n);
