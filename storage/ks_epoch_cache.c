#include "ks_epoch_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ks_checkpoint.h"

void ks_epoch_cache_init(ks_epoch_cache *c)
{
    memset(c, 0, sizeof(*c));
}

void ks_epoch_cache_fini(ks_epoch_cache *c)
{
    free(c->v);
    memset(c, 0, sizeof(*c));
}

void ks_epoch_cache_clear(ks_epoch_cache *c)
{
    c->n = 0;
}

int32_t ks_epoch_cache_latest(const ks_epoch_cache *c)
{
    return c->n > 0 ? c->v[c->n - 1].epoch : -1;
}

static kp_err reserve(ks_epoch_cache *c)
{
    if (c->n < c->cap)
        return KP_ERR_NONE;
    int32_t cap = c->cap > 0 ? c->cap * 2 : 8;
    ks_epoch_entry *v = realloc(c->v, (size_t)cap * sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    c->v = v;
    c->cap = cap;
    return KP_ERR_NONE;
}

static kp_err push(ks_epoch_cache *c, int32_t epoch, int64_t start)
{
    if (reserve(c) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    c->v[c->n++] = (ks_epoch_entry){epoch, start};
    return KP_ERR_NONE;
}

kp_err ks_epoch_cache_assign(ks_epoch_cache *c, int32_t epoch, int64_t start, bool *changed)
{
    *changed = false;
    if (epoch < 0 || start < 0)
        return KP_ERR__INVAL;
    if (c->n > 0 && c->v[c->n - 1].epoch == epoch && c->v[c->n - 1].start_offset <= start)
        return KP_ERR_NONE;
    if (reserve(c) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    /* entries are monotonic: those at or past the new one in either order go */
    while (c->n > 0 && (c->v[c->n - 1].epoch >= epoch || c->v[c->n - 1].start_offset >= start))
        c->n--;
    c->v[c->n++] = (ks_epoch_entry){epoch, start};
    *changed = true;
    return KP_ERR_NONE;
}

void ks_epoch_cache_end_offset(const ks_epoch_cache *c, int32_t epoch, int64_t leo,
                               int32_t *out_epoch, int64_t *out_end)
{
    *out_epoch = -1;
    *out_end = -1;
    if (epoch < 0 || c->n == 0)
        return;
    if (c->v[c->n - 1].epoch == epoch) {
        *out_epoch = epoch;
        *out_end = leo;
        return;
    }
    int32_t higher = 0; /* the first entry with an epoch > epoch */
    while (higher < c->n && c->v[higher].epoch <= epoch)
        higher++;
    if (higher == c->n)
        return; /* past the latest epoch */
    *out_epoch = higher > 0 ? c->v[higher - 1].epoch : epoch;
    *out_end = c->v[higher].start_offset;
}

bool ks_epoch_cache_truncate_end(ks_epoch_cache *c, int64_t end)
{
    int32_t n = c->n;
    while (c->n > 0 && c->v[c->n - 1].start_offset >= end)
        c->n--;
    return c->n != n;
}

bool ks_epoch_cache_truncate_start(ks_epoch_cache *c, int64_t start)
{
    int32_t floor = -1; /* the last entry starting at or below start */
    for (int32_t i = 0; i < c->n && c->v[i].start_offset <= start; i++)
        floor = i;
    if (floor < 0 || (floor == 0 && c->v[0].start_offset == start))
        return false;
    memmove(c->v, c->v + floor, (size_t)(c->n - floor) * sizeof(*c->v));
    c->n -= floor;
    c->v[0].start_offset = start;
    return true;
}

kp_err ks_epoch_cache_write(const ks_epoch_cache *c, const ks_io *io, const char *dir,
                            kp_errctx *ctx)
{
    size_t cap = 32 + (size_t)c->n * 34; /* two decimal numbers, a space, '\n' */
    char *text = malloc(cap);
    if (text == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "%s text", KS_EPOCH_CHECKPOINT);
    size_t len = (size_t)snprintf(text, cap, "0\n%d\n", (int)c->n);
    for (int32_t i = 0; i < c->n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%d %lld\n", (int)c->v[i].epoch,
                                (long long)c->v[i].start_offset);
    kp_err err = ks_io_write_file_atomic(io, dir, KS_EPOCH_CHECKPOINT, text, len, ctx);
    free(text);
    return err;
}

/* One decimal number >= 0 ending at a space or '\n'; advances *s. */
static bool parse_num(char **s, char end, int64_t max, int64_t *v)
{
    char *e;
    errno = 0;
    if (**s < '0' || **s > '9')
        return false;
    long long x = strtoll(*s, &e, 10);
    if (errno != 0 || *e != end || x < 0 || x > max)
        return false;
    *v = x;
    *s = e + 1;
    return true;
}

static kp_err parse(ks_epoch_cache *c, char *s, kp_errctx *ctx)
{
    int64_t version, n, epoch, start;
    if (!parse_num(&s, '\n', 0, &version) || !parse_num(&s, '\n', KS_EPOCH_MAX_ENTRIES, &n))
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s header", KS_EPOCH_CHECKPOINT);
    for (int64_t i = 0; i < n; i++) {
        if (!parse_num(&s, ' ', INT32_MAX, &epoch) || !parse_num(&s, '\n', INT64_MAX, &start))
            return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s entry %lld", KS_EPOCH_CHECKPOINT,
                             (long long)i);
        if (c->n > 0 && (c->v[c->n - 1].epoch >= epoch || c->v[c->n - 1].start_offset >= start))
            return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s entry %lld out of order",
                             KS_EPOCH_CHECKPOINT, (long long)i);
        if (push(c, (int32_t)epoch, start) != KP_ERR_NONE)
            return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "%s entries", KS_EPOCH_CHECKPOINT);
    }
    if (*s != '\0')
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s: text after %lld entries",
                         KS_EPOCH_CHECKPOINT, (long long)n);
    return KP_ERR_NONE;
}

kp_err ks_epoch_cache_read(ks_epoch_cache *c, const ks_io *io, const char *dir, kp_errctx *ctx)
{
    char *text = NULL;
    c->n = 0;
    kp_err err = ks_checkpoint_slurp(io, dir, KS_EPOCH_CHECKPOINT, &text, ctx);
    if (err == KP_ERR_NONE)
        err = parse(c, text, ctx);
    if (err != KP_ERR_NONE)
        c->n = 0;
    free(text);
    return err;
}
