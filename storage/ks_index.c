#include "ks_index.h"

#include <fcntl.h>
#include <stdlib.h>

#include "kp_batch.h"

static int32_t entry_size(const ks_index *ix)
{
    return ix->kind == KS_INDEX_OFFSET ? KS_INDEX_OFFSET_ENTRY : KS_INDEX_TIME_ENTRY;
}

void ks_index_init(ks_index *ix, ks_index_kind kind, int32_t max_entries)
{
    ix->fd = -1;
    ix->kind = kind;
    ix->n = 0;
    ix->cap = 0;
    ix->max_entries = max_entries > 1 ? max_entries : 1;
    ix->keys = NULL;
    ix->vals = NULL;
}

void ks_index_fini(ks_index *ix, const ks_io *io)
{
    ks_io_close(io, ix->fd);
    ix->fd = -1;
    free(ix->keys);
    free(ix->vals);
    ix->keys = NULL;
    ix->vals = NULL;
    ix->n = ix->cap = 0;
}

kp_err ks_index_open(ks_index *ix, const ks_io *io, const char *path, bool truncate,
                     kp_errctx *ctx)
{
    int flags = O_RDWR | O_CREAT | (truncate ? O_TRUNC : 0);
    return ks_io_open(io, path, flags, &ix->fd, ctx);
}

static kp_err reserve(ks_index *ix, int32_t want)
{
    if (want <= ix->cap)
        return KP_ERR_NONE;
    int32_t cap = ix->cap > 0 ? ix->cap : 64;
    while (cap < want)
        cap = cap > INT32_MAX / 2 ? want : cap * 2;
    int64_t *k = realloc(ix->keys, (size_t)cap * sizeof(*k));
    if (k == NULL)
        return KP_ERR__NOMEM;
    ix->keys = k;
    int32_t *v = realloc(ix->vals, (size_t)cap * sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    ix->vals = v;
    ix->cap = cap;
    return KP_ERR_NONE;
}

static void decode_entry(const ks_index *ix, const uint8_t *p, int64_t *key, int32_t *val)
{
    if (ix->kind == KS_INDEX_OFFSET) {
        *key = kp_be32_get(p);
        *val = kp_be32_get(p + 4);
    } else {
        *key = kp_be64_get(p);
        *val = kp_be32_get(p + 8);
    }
}

static void encode_entry(const ks_index *ix, uint8_t *p, int64_t key, int32_t val)
{
    if (ix->kind == KS_INDEX_OFFSET) {
        kp_be32_put(p, (int32_t)key);
        kp_be32_put(p + 4, val);
    } else {
        kp_be64_put(p, key);
        kp_be32_put(p + 8, val);
    }
}

/* Decodes buf into memory, checking invariant 1 and the limits. */
static kp_err decode_all(ks_index *ix, const uint8_t *buf, int32_t n, int64_t key_limit,
                         int64_t val_limit, kp_errctx *ctx)
{
    for (int32_t i = 0; i < n; i++) {
        int64_t key;
        int32_t val;
        decode_entry(ix, buf + (size_t)i * (size_t)entry_size(ix), &key, &val);
        bool ordered = i == 0 || (key > ix->keys[i - 1] && val >= ix->vals[i - 1]);
        if (!ordered || key >= key_limit || val < 0 || val >= val_limit ||
            (ix->kind == KS_INDEX_OFFSET && key < 0)) {
            ix->n = 0;
            return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "index entry %d out of order or range", i);
        }
        ix->keys[i] = key;
        ix->vals[i] = val;
        ix->n = i + 1;
    }
    return KP_ERR_NONE;
}

kp_err ks_index_load(ks_index *ix, const ks_io *io, int64_t key_limit, int64_t val_limit,
                     kp_errctx *ctx)
{
    int64_t size = 0;
    ix->n = 0;
    kp_err err = ks_io_fsize(io, ix->fd, &size, NULL, ctx);
    if (err != KP_ERR_NONE)
        return err;
    int32_t es = entry_size(ix);
    if (size % es != 0 || size / es > INT32_MAX / 2)
        return KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "index size %lld", (long long)size);
    int32_t n = (int32_t)(size / es);
    if (n == 0)
        return KP_ERR_NONE;
    uint8_t *buf = malloc((size_t)size);
    if (buf == NULL || reserve(ix, n) != KP_ERR_NONE) {
        free(buf);
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "index of %d entries", n);
    }
    err = ks_io_read_all(io, ix->fd, buf, (size_t)size, 0, ctx);
    if (err == KP_ERR_NONE)
        err = decode_all(ix, buf, n, key_limit, val_limit, ctx);
    free(buf);
    return err;
}

kp_err ks_index_append(ks_index *ix, const ks_io *io, int64_t key, int32_t val,
                       kp_errctx *ctx)
{
    if (ix->n > 0 && (key <= ix->keys[ix->n - 1] || val < ix->vals[ix->n - 1]))
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "index entry out of order");
    if (reserve(ix, ix->n + 1) != KP_ERR_NONE)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "index grow");
    uint8_t buf[KS_INDEX_TIME_ENTRY];
    int32_t es = entry_size(ix);
    encode_entry(ix, buf, key, val);
    kp_err err = ks_io_write_all(io, ix->fd, buf, (size_t)es, (int64_t)ix->n * es, ctx);
    if (err != KP_ERR_NONE) {
        (void)ks_io_ftruncate(io, ix->fd, (int64_t)ix->n * es, NULL);
        return err;
    }
    ix->keys[ix->n] = key;
    ix->vals[ix->n] = val;
    ix->n++;
    return KP_ERR_NONE;
}

kp_err ks_index_truncate(ks_index *ix, const ks_io *io, int32_t n, kp_errctx *ctx)
{
    if (n < 0 || n > ix->n)
        n = n < 0 ? 0 : ix->n;
    kp_err err = ks_io_ftruncate(io, ix->fd, (int64_t)n * entry_size(ix), ctx);
    if (err == KP_ERR_NONE)
        ix->n = n;
    return err;
}

kp_err ks_index_sync(const ks_index *ix, const ks_io *io, kp_errctx *ctx)
{
    return ks_io_fdatasync(io, ix->fd, ctx);
}

bool ks_index_full(const ks_index *ix)
{
    return ix->n >= ix->max_entries;
}

int32_t ks_index_floor_key(const ks_index *ix, int64_t key, bool strict)
{
    int32_t lo = 0, hi = ix->n; /* answer is the count of qualifying entries - 1 */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        bool ok = strict ? ix->keys[mid] < key : ix->keys[mid] <= key;
        if (ok)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

int32_t ks_index_count_below_val(const ks_index *ix, int64_t val)
{
    int32_t lo = 0, hi = ix->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (ix->vals[mid] < val)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int32_t ks_index_floor_val(const ks_index *ix, int64_t val)
{
    return ks_index_count_below_val(ix, val + 1) - 1;
}
