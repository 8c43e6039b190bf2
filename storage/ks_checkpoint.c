#include "ks_checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPT_MAX_FILE ((int64_t)64 << 20)

typedef struct text_buf {
    char *p;
    size_t len;
    size_t cap;
    bool nomem;
} text_buf;

static void tb_printf(text_buf *tb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_printf(text_buf *tb, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = tb->nomem ? -1 : vsnprintf(tb->p + tb->len, tb->cap - tb->len, fmt, ap);
        va_end(ap);
        if (w < 0) {
            tb->nomem = true;
            return;
        }
        if ((size_t)w < tb->cap - tb->len) {
            tb->len += (size_t)w;
            return;
        }
        size_t cap = (tb->cap + (size_t)w + 1) * 2;
        char *p = realloc(tb->p, cap);
        if (p == NULL) {
            tb->nomem = true;
            return;
        }
        tb->p = p;
        tb->cap = cap;
    }
}

kp_err ks_checkpoint_write(const ks_io *io, const char *log_dir, const char *name,
                           const ks_ckpt_entry *entries, size_t n, kp_errctx *ctx)
{
    text_buf tb = {0};
    tb_printf(&tb, "0\n%zu\n", n);
    for (size_t i = 0; i < n; i++)
        tb_printf(&tb, "%s %d %lld\n", entries[i].topic, (int)entries[i].partition,
                  (long long)entries[i].offset);
    kp_err err = tb.nomem ? KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "checkpoint text")
                          : ks_io_write_file_atomic(io, log_dir, name, tb.p, tb.len, ctx);
    free(tb.p);
    return err;
}

kp_err ks_checkpoint_slurp(const ks_io *io, const char *dir, const char *name, char **out,
                           kp_errctx *ctx)
{
    char path[PATH_MAX];
    int fd = -1;
    int64_t size = 0;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    kp_err err = ks_io_open(io, path, O_RDONLY, &fd, ctx);
    if (err == KP_ERR_NONE)
        err = ks_io_fsize(io, fd, &size, NULL, ctx);
    if (err == KP_ERR_NONE && size > CKPT_MAX_FILE)
        err = KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s: %lld bytes", path, (long long)size);
    char *buf = err == KP_ERR_NONE ? malloc((size_t)size + 1) : NULL;
    if (err == KP_ERR_NONE && buf == NULL)
        err = KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "%s", path);
    if (err == KP_ERR_NONE)
        err = ks_io_read_all(io, fd, buf, (size_t)size, 0, ctx);
    ks_io_close(io, fd);
    if (err != KP_ERR_NONE) {
        free(buf);
        return err;
    }
    buf[size] = '\0';
    *out = buf;
    return KP_ERR_NONE;
}

static bool parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || x < 0)
        return false;
    *v = x;
    return true;
}

/* Parses "topic partition offset" in place (the line is modified). */
static bool parse_entry(char *line, ks_ckpt_entry *e)
{
    char *sp2 = strrchr(line, ' ');
    if (sp2 == NULL || sp2 == line)
        return false;
    *sp2 = '\0';
    char *sp1 = strrchr(line, ' ');
    if (sp1 == NULL || sp1 == line)
        return false;
    *sp1 = '\0';
    int64_t part;
    if (!parse_i64(sp1 + 1, &part) || part > INT32_MAX || !parse_i64(sp2 + 1, &e->offset))
        return false;
    e->partition = (int32_t)part;
    e->topic = strdup(line);
    return e->topic != NULL;
}

static kp_err parse_file(char *text, ks_ckpt_entry **entries, size_t *n, kp_errctx *ctx)
{
    char *save = NULL;
    char *version = strtok_r(text, "\n", &save);
    char *count = strtok_r(NULL, "\n", &save);
    int64_t want = 0;
    if (version == NULL || strcmp(version, "0") != 0 || count == NULL ||
        !parse_i64(count, &want) || want > CKPT_MAX_FILE / 6)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "checkpoint header");
    ks_ckpt_entry *v = calloc(want > 0 ? (size_t)want : 1, sizeof(*v));
    if (v == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "checkpoint entries");
    size_t got = 0;
    char *line;
    while (got < (size_t)want && (line = strtok_r(NULL, "\n", &save)) != NULL) {
        if (!parse_entry(line, &v[got]))
            break;
        got++;
    }
    if (got != (size_t)want || strtok_r(NULL, "\n", &save) != NULL) {
        ks_checkpoint_free(v, got);
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "checkpoint: %zu of %lld entries", got,
                         (long long)want);
    }
    *entries = v;
    *n = got;
    return KP_ERR_NONE;
}

kp_err ks_checkpoint_read(const ks_io *io, const char *log_dir, const char *name,
                          ks_ckpt_entry **entries, size_t *n, kp_errctx *ctx)
{
    char *text = NULL;
    *entries = NULL;
    *n = 0;
    kp_err err = ks_checkpoint_slurp(io, log_dir, name, &text, ctx);
    if (err == KP_ERR__NOENT)
        return KP_ERR_NONE;
    if (err == KP_ERR_NONE)
        err = parse_file(text, entries, n, ctx);
    free(text);
    return err;
}

void ks_checkpoint_free(ks_ckpt_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(entries[i].topic);
    free(entries);
}

int64_t ks_checkpoint_find(const ks_ckpt_entry *entries, size_t n, const char *topic,
                           int32_t partition)
{
    for (size_t i = 0; i < n; i++) {
        if (entries[i].partition == partition && strcmp(entries[i].topic, topic) == 0)
            return entries[i].offset;
    }
    return -1;
}

kp_err ks_clean_shutdown_mark(const ks_io *io, const char *log_dir, int64_t broker_epoch,
                              kp_errctx *ctx)
{
    char text[64];
    int n = snprintf(text, sizeof(text), "{\"version\":0,\"brokerEpoch\":%lld}",
                     (long long)broker_epoch);
    return ks_io_write_file_atomic(io, log_dir, KS_CLEAN_SHUTDOWN, text, (size_t)n, ctx);
}

kp_err ks_clean_shutdown_take(const ks_io *io, const char *log_dir, bool *was_clean,
                              kp_errctx *ctx)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", log_dir, KS_CLEAN_SHUTDOWN);
    int rc = io->ops->unlink(io->ctx, path);
    *was_clean = rc == 0;
    if (rc < 0 && rc != -ENOENT)
        return ks_io_err(ctx, rc, "unlink", path);
    return rc == 0 ? ks_io_fsync_dir(io, log_dir, ctx) : KP_ERR_NONE;
}
