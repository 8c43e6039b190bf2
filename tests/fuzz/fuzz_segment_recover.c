/*
 * fuzz_segment_recover: storage recovery over arbitrary segment bytes.
 *
 * Input: byte 0 flags (bit 0: open as after a clean shutdown), byte 1 the
 * length n of an offset index, then n index bytes, then the .log bytes.
 * They are written as <tmp>/f-0/00000000000000000000.{index,log} and the
 * partition is opened with ks_log_open.
 *
 * Checks: opening never fails on these bytes (only I/O errors may fail
 * recovery), every offset from the log start to the log end reads back, the
 * log takes a new batch at the log end, and after a close and a clean reopen
 * the log end is the same.
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "ks_log.h"
#include "kt_batch_build.h"

static char *tmp_root;

static void fail(const char *what, kp_err e, const kp_errctx *ctx)
{
    fprintf(stderr, "fuzz_segment_recover: %s: %s (%s)\n", what, kp_err_name(e),
            ctx ? ctx->msg : "");
    abort();
}

static void write_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[1024];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
        abort();
    FILE *f = fopen(path, "wb");
    if (f == NULL || (n > 0 && fwrite(p, 1, n, f) != n))
        abort();
    fclose(f);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_tmp_root(void)
{
    if (tmp_root != NULL)
        (void)nftw(tmp_root, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void open_log(const ks_io *io, bool clean, int64_t rp, ks_log **log)
{
    ks_log_config cfg;
    ks_log_config_default(&cfg);
    ks_log_open_args args = {.recovery_point = rp, .log_start_offset = -1,
                             .clean_shutdown = clean, .now_ms = 1700000000000};
    kp_errctx ctx = {0};
    ks_recover_report rep;
    kp_err e = ks_log_open(io, tmp_root, "f", 0, &cfg, &args, log, &rep, &ctx);
    if (e != KP_ERR_NONE)
        fail("open", e, &ctx);
}

/* Reads every offset of the log, walking batch to batch. strict: a read
 * error is a bug (after a scan); otherwise it only ends the walk (after a
 * "clean" open the bytes were trusted unread, so a bad header is found
 * late, and reported). */
static void read_all(ks_log *log, bool strict)
{
    int64_t off = ks_log_start_offset(log), end = ks_log_end_offset(log);
    for (int i = 0; i < 100000 && off < end; i++) {
        ks_log_slice s;
        kp_errctx ctx = {0};
        kp_err e = ks_log_read(log, off, 1, end, &s, &ctx);
        if (e != KP_ERR_NONE && !strict)
            return;
        if (e != KP_ERR_NONE)
            fail("read", e, &ctx);
        if (s.range.len <= 0)
            fail("empty read below the log end", e, &ctx);
        uint8_t hdr[KP_BATCH_HDR_SIZE];
        if (pread(s.range.fd, hdr, sizeof(hdr), s.range.off) != (ssize_t)sizeof(hdr)) {
            ks_log_slice_release(&s);
            if (!strict)
                return;
            fail("short batch header", e, &ctx);
        }
        int64_t base = 0;
        for (int b = 0; b < 8; b++)
            base = (int64_t)((uint64_t)base << 8 | hdr[b]);
        int32_t last_delta = (int32_t)((uint32_t)hdr[23] << 24 | (uint32_t)hdr[24] << 16 |
                                       (uint32_t)hdr[25] << 8 | hdr[26]);
        int64_t next = base + last_delta + 1;
        ks_log_slice_release(&s);
        if (next <= off && !strict)
            return;
        if (next <= off)
            fail("read went backwards", KP_ERR__CORRUPT, NULL);
        off = next;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    if (tmp_root == NULL) {
        const char *t = getenv("TMPDIR");
        char tmpl[512];
        snprintf(tmpl, sizeof(tmpl), "%s/runnel-fuzz-XXXXXX", t ? t : "/tmp");
        tmp_root = strdup(tmpl);
        if (tmp_root == NULL || mkdtemp(tmp_root) == NULL)
            abort();
        atexit(remove_tmp_root);
    }
    bool clean = data[0] & 1;
    size_t ilen = data[1];
    if (ilen > size - 2)
        ilen = size - 2;
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/f-0", tmp_root);
    (void)nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    if (mkdir(dir, 0700) != 0)
        abort();
    write_file(dir, "00000000000000000000.index", data + 2, ilen);
    write_file(dir, "00000000000000000000.log", data + 2 + ilen, size - 2 - ilen);

    ks_io io = ks_io_posix();
    ks_log *log = NULL;
    open_log(&io, clean, clean ? -1 : 0, &log);
    if (clean) {
        read_all(log, false);
        kp_errctx cctx = {0};
        (void)ks_log_close(log, &cctx);
        return 0;
    }
    read_all(log, true);

    size_t blen = 0;
    uint8_t *batch = kt_batch_build(2, 8, 1700000000000, 1, &blen);
    ks_append_result ar;
    kp_errctx ctx = {0};
    int64_t end0 = ks_log_end_offset(log);
    kp_err e = ks_log_append(log, batch, blen, 0, 1700000000000, &ar, &ctx);
    free(batch);
    if (e != KP_ERR_NONE)
        fail("append after recovery", e, &ctx);
    if (ar.base_offset != end0 || ks_log_end_offset(log) != end0 + 2)
        fail("append not at the log end", KP_ERR__CORRUPT, NULL);
    int64_t end = ks_log_end_offset(log);
    if ((e = ks_log_close(log, &ctx)) != KP_ERR_NONE)
        fail("close", e, &ctx);

    open_log(&io, true, end, &log);
    if (ks_log_end_offset(log) != end)
        fail("log end moved across a clean reopen", KP_ERR__CORRUPT, NULL);
    read_all(log, true);
    (void)ks_log_close(log, &ctx);
    return 0;
}
