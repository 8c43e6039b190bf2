#include "kt_storage.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp_batch.h"
#include "kt_batch_build.h"

static kt_faultio *fio(void *ctx)
{
    return ctx;
}

static int f_open(void *ctx, const char *path, int flags, int mode)
{
    return fio(ctx)->base.ops->open(NULL, path, flags, mode);
}

static int f_close(void *ctx, int fd)
{
    return fio(ctx)->base.ops->close(NULL, fd);
}

static ssize_t f_pread(void *ctx, int fd, void *buf, size_t n, int64_t off)
{
    return fio(ctx)->base.ops->pread(NULL, fd, buf, n, off);
}

/* Decides how many bytes this pwrite may move: < 0 is an error. */
static ssize_t write_allowance(kt_faultio *f, size_t n)
{
    pthread_mutex_lock(&f->mu);
    ssize_t allow = (ssize_t)n;
    if (f->short_max > 0 && n > f->short_max)
        allow = (ssize_t)f->short_max;
    if (f->write_budget >= 0) {
        if (f->write_budget == 0)
            allow = -f->write_errno;
        else if (allow > f->write_budget)
            allow = (ssize_t)f->write_budget;
        if (allow > 0)
            f->write_budget -= allow;
    }
    pthread_mutex_unlock(&f->mu);
    return allow;
}

static ssize_t f_pwrite(void *ctx, int fd, const void *buf, size_t n, int64_t off)
{
    kt_faultio *f = fio(ctx);
    ssize_t allow = write_allowance(f, n);
    if (allow < 0)
        return allow;
    return f->base.ops->pwrite(NULL, fd, buf, (size_t)allow, off);
}

static int f_fdatasync(void *ctx, int fd)
{
    kt_faultio *f = fio(ctx);
    pthread_mutex_lock(&f->mu);
    f->waiting++;
    pthread_cond_broadcast(&f->cv);
    while (f->gate_closed)
        pthread_cond_wait(&f->cv, &f->mu);
    f->waiting--;
    int e = f->sync_errno;
    f->syncs++;
    pthread_mutex_unlock(&f->mu);
    return e != 0 ? -e : f->base.ops->fdatasync(NULL, fd);
}

static int f_ftruncate(void *ctx, int fd, int64_t len)
{
    kt_faultio *f = fio(ctx);
    pthread_mutex_lock(&f->mu);
    bool dead = f->crash && f->write_budget == 0;
    pthread_mutex_unlock(&f->mu);
    return dead ? -EIO : f->base.ops->ftruncate(NULL, fd, len);
}

static int f_fsize(void *ctx, int fd, int64_t *size, int64_t *mtime_ms)
{
    return fio(ctx)->base.ops->fsize(NULL, fd, size, mtime_ms);
}

static int f_rename(void *ctx, const char *from, const char *to)
{
    return fio(ctx)->base.ops->rename(NULL, from, to);
}

static int f_unlink(void *ctx, const char *path)
{
    return fio(ctx)->base.ops->unlink(NULL, path);
}

static int f_mkdir(void *ctx, const char *path, int mode)
{
    return fio(ctx)->base.ops->mkdir(NULL, path, mode);
}

static int f_rmdir(void *ctx, const char *path)
{
    return fio(ctx)->base.ops->rmdir(NULL, path);
}

static int f_fsync_dir(void *ctx, const char *path)
{
    return fio(ctx)->base.ops->fsync_dir(NULL, path);
}

static int f_list_dir(void *ctx, const char *path, ks_io_dirent_cb *cb, void *arg)
{
    return fio(ctx)->base.ops->list_dir(NULL, path, cb, arg);
}

static const ks_io_ops fault_ops = {
    .open = f_open,
    .close = f_close,
    .pread = f_pread,
    .pwrite = f_pwrite,
    .fdatasync = f_fdatasync,
    .ftruncate = f_ftruncate,
    .fsize = f_fsize,
    .rename = f_rename,
    .unlink = f_unlink,
    .mkdir = f_mkdir,
    .rmdir = f_rmdir,
    .fsync_dir = f_fsync_dir,
    .list_dir = f_list_dir,
};

void kt_faultio_init(kt_faultio *f)
{
    memset(f, 0, sizeof(*f));
    f->io.ops = &fault_ops;
    f->io.ctx = f;
    f->base = ks_io_posix();
    f->write_budget = -1;
    f->write_errno = ENOSPC;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
}

void kt_faultio_gate(kt_faultio *f, bool closed)
{
    pthread_mutex_lock(&f->mu);
    f->gate_closed = closed;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

void kt_faultio_wait_blocked(kt_faultio *f, int n)
{
    pthread_mutex_lock(&f->mu);
    while (f->waiting < n)
        pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}

void kt_faultio_fini(kt_faultio *f)
{
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
}

void kt_faultio_set(kt_faultio *f, int64_t budget, int write_errno, bool crash)
{
    pthread_mutex_lock(&f->mu);
    f->write_budget = budget;
    f->write_errno = write_errno;
    f->crash = crash;
    pthread_mutex_unlock(&f->mu);
}

void kt_faultio_set_sync(kt_faultio *f, int sync_errno)
{
    pthread_mutex_lock(&f->mu);
    f->sync_errno = sync_errno;
    pthread_mutex_unlock(&f->mu);
}

/* The fixture's state: one test runs at a time per process. */
static char *fixture_dir;
static ks_io fixture_io;
static kt_faultio fixture_fio;

void kt_fixture_setup(void)
{
    fixture_dir = kt_tmpdir();
    fixture_io = ks_io_posix();
    kt_faultio_init(&fixture_fio);
}

void kt_fixture_teardown(void)
{
    kt_faultio_fini(&fixture_fio);
    kt_rmtree(fixture_dir);
    fixture_dir = NULL;
}

kt_faultio *kt_fio(void)
{
    return &fixture_fio;
}

const char *kt_dir(void)
{
    return fixture_dir;
}

const ks_io *kt_io(void)
{
    return &fixture_io;
}

char *kt_tmpdir(void)
{
    char *dir = strdup("/tmp/runnel-storage-XXXXXX");
    ck_assert_ptr_nonnull(dir);
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void kt_rmtree(char *dir)
{
    if (dir == NULL)
        return;
    (void)nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

void kt_small_config(ks_log_config *cfg, int64_t segment_bytes, int32_t index_interval)
{
    ks_log_config_default(cfg);
    cfg->segment_bytes = segment_bytes;
    cfg->index_interval_bytes = index_interval;
    cfg->retention_ms = -1;
}

ks_log *kt_open(const ks_io *io, const char *dir, const ks_log_config *cfg, bool clean,
                int64_t recovery_point, ks_recover_report *rep)
{
    ks_log_open_args args = {
        .recovery_point = recovery_point,
        .log_start_offset = -1,
        .clean_shutdown = clean,
        .now_ms = 1000,
    };
    ks_log *log = NULL;
    kp_errctx ctx = {0};
    kp_err err = ks_log_open(io, dir, "t", 0, cfg, &args, &log, rep, &ctx);
    ck_assert_msg(err == KP_ERR_NONE, "open: %s %s", kp_err_name(err), ctx.msg);
    return log;
}

int64_t kt_append(ks_log *log, int32_t n, size_t value_len, int64_t ts, int64_t now_ms)
{
    size_t len;
    uint8_t *b = kt_batch_build(n, value_len, ts, 1, &len);
    ks_append_result res;
    kp_errctx ctx = {0};
    kp_err err = ks_log_append(log, b, len, 3, now_ms, &res, &ctx);
    free(b);
    ck_assert_msg(err == KP_ERR_NONE, "append: %s %s", kp_err_name(err), ctx.msg);
    ck_assert_int_eq(res.last_offset - res.base_offset, n - 1);
    return res.base_offset;
}

void kt_pread(int fd, void *buf, size_t size, int64_t off)
{
    ssize_t got = pread(fd, buf, size, (off_t)off);
    ck_assert_int_eq(got, (ssize_t)size);
}

kp_err kt_model_try(ks_log *log, kt_model *m, int32_t nrec, size_t vlen, int64_t ts,
                    int64_t now_ms, kp_errctx *ctx)
{
    size_t len;
    uint8_t *b = kt_batch_build(nrec, vlen, ts, 1, &len);
    ks_append_result res;
    kp_err err = ks_log_append(log, b, len, 3, now_ms, &res, ctx);
    free(b);
    if (err != KP_ERR_NONE)
        return err;
    if (m->n == m->cap) {
        m->cap = m->cap > 0 ? m->cap * 2 : 64;
        m->v = realloc(m->v, (size_t)m->cap * sizeof(*m->v));
        ck_assert_ptr_nonnull(m->v);
    }
    m->v[m->n++] =
        (kt_batch_rec){res.base_offset, res.last_offset, ts + nrec - 1, (int32_t)len};
    return KP_ERR_NONE;
}

void kt_model_fill(ks_log *log, kt_model *m, int32_t batches, int64_t now_ms, unsigned seed)
{
    for (int32_t i = 0; i < batches; i++) {
        int32_t nrec = 1 + (int32_t)(rand_r(&seed) % 5);
        size_t vlen = 1 + (size_t)(rand_r(&seed) % 300);
        int64_t ts = 1000000 + (int64_t)(rand_r(&seed) % 100000);
        kp_errctx ctx = {0};
        kp_err err = kt_model_try(log, m, nrec, vlen, ts, now_ms, &ctx);
        ck_assert_msg(err == KP_ERR_NONE, "append: %s %s", kp_err_name(err), ctx.msg);
    }
}

void kt_model_free(kt_model *m)
{
    free(m->v);
    memset(m, 0, sizeof(*m));
}

int32_t kt_model_find(const kt_model *m, int64_t offset)
{
    for (int32_t i = 0; i < m->n; i++) {
        if (m->v[i].base <= offset && offset <= m->v[i].last)
            return i;
    }
    return -1;
}

void kt_check_reads(ks_log *log, const kt_model *m, int32_t n)
{
    for (int32_t i = 0; i < n; i++) {
        const kt_batch_rec *r = &m->v[i];
        for (int64_t off = r->base; off <= r->last; off++) {
            ks_log_slice s;
            kp_errctx ctx = {0};
            kp_err err = ks_log_read(log, off, 1, INT64_MAX, &s, &ctx);
            ck_assert_msg(err == KP_ERR_NONE, "read %lld: %s", (long long)off, ctx.msg);
            ck_assert_int_eq(s.first_offset, r->base);
            ck_assert_int_eq(s.range.len, r->len);
            uint8_t *buf = malloc((size_t)r->len);
            kt_pread(s.range.fd, buf, (size_t)r->len, s.range.off);
            kp_batch_hdr h;
            ck_assert_int_eq(kp_batch_check(buf, (size_t)r->len, &h), KP_ERR_NONE);
            ck_assert_int_eq(h.base_offset, r->base);
            ck_assert_int_eq(h.partition_leader_epoch, 3);
            free(buf);
            ks_log_slice_release(&s);
        }
    }
}
