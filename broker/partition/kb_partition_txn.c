#include "kb_partition_txn.h"

#include <stdlib.h>
#include <string.h>

#include "kp_records.h"

typedef struct open_txn {
    int64_t producer_id;
    int64_t first_offset;
} open_txn;

struct kb_partition_txn {
    open_txn *open; /* unordered; few producers write one partition */
    int32_t nopen;
    int32_t capopen;
    kb_aborted_txn *aborted; /* by last_offset, ascending */
    int32_t naborted;
    int32_t capaborted;
};

/* Makes room for one more element of size elem in *v (capacity *cap). */
static kp_err reserve_one(void **v, int32_t n, int32_t *cap, size_t elem)
{
    if (n < *cap)
        return KP_ERR_NONE;
    int32_t c = *cap ? *cap * 2 : 8;
    void *nv = realloc(*v, (size_t)c * elem);
    if (nv == NULL)
        return KP_ERR__NOMEM;
    *v = nv;
    *cap = c;
    return KP_ERR_NONE;
}

kb_partition_txn *kb_partition_txn_new(void)
{
    return calloc(1, sizeof(kb_partition_txn));
}

void kb_partition_txn_free(kb_partition_txn *x)
{
    if (x == NULL)
        return;
    free(x->open);
    free(x->aborted);
    free(x);
}

static int32_t find_open(const kb_partition_txn *x, int64_t producer_id)
{
    for (int32_t i = 0; i < x->nopen; i++)
        if (x->open[i].producer_id == producer_id)
            return i;
    return -1;
}

kp_err kb_partition_txn_on_data(kb_partition_txn *x, int64_t producer_id, int64_t base_offset)
{
    if (find_open(x, producer_id) >= 0)
        return KP_ERR_NONE;
    if (reserve_one((void **)&x->open, x->nopen, &x->capopen, sizeof(*x->open)) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    x->open[x->nopen++] = (open_txn){producer_id, base_offset};
    return KP_ERR_NONE;
}

/* Drops the oldest quarter of the aborted entries (invariant 3). */
static void drop_oldest(kb_partition_txn *x)
{
    int32_t drop = x->naborted / 4 > 0 ? x->naborted / 4 : 1;
    memmove(x->aborted, x->aborted + drop, (size_t)(x->naborted - drop) * sizeof(*x->aborted));
    x->naborted -= drop;
}

static kp_err push_aborted(kb_partition_txn *x, const kb_aborted_txn *a)
{
    if (x->naborted >= KB_PARTITION_TXN_ABORTED_MAX)
        drop_oldest(x);
    if (reserve_one((void **)&x->aborted, x->naborted, &x->capaborted, sizeof(*x->aborted)) !=
        KP_ERR_NONE)
        return KP_ERR__NOMEM;
    x->aborted[x->naborted++] = *a;
    return KP_ERR_NONE;
}

kp_err kb_partition_txn_on_marker(kb_partition_txn *x, int64_t producer_id, bool commit, int64_t offset)
{
    int32_t i = find_open(x, producer_id);
    if (i < 0)
        return KP_ERR_NONE;
    kb_aborted_txn a = {producer_id, x->open[i].first_offset, offset};
    x->open[i] = x->open[--x->nopen];
    if (commit)
        return KP_ERR_NONE;
    return push_aborted(x, &a);
}

bool kb_partition_txn_open(const kb_partition_txn *x, int64_t producer_id, int64_t *first_offset)
{
    int32_t i = find_open(x, producer_id);
    if (i >= 0 && first_offset != NULL)
        *first_offset = x->open[i].first_offset;
    return i >= 0;
}

int32_t kb_partition_txn_open_count(const kb_partition_txn *x)
{
    return x->nopen;
}

int64_t kb_partition_txn_lso(const kb_partition_txn *x, int64_t high_watermark)
{
    int64_t lso = high_watermark;
    for (int32_t i = 0; i < x->nopen; i++)
        if (x->open[i].first_offset < lso)
            lso = x->open[i].first_offset;
    return lso;
}

/* The first aborted entry whose last_offset >= from. */
static int32_t lower_bound(const kb_partition_txn *x, int64_t from)
{
    int32_t lo = 0, hi = x->naborted;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (x->aborted[mid].last_offset < from)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int32_t kb_partition_txn_aborted(const kb_partition_txn *x, int64_t from, int64_t upto, kb_aborted_txn *out,
                        int32_t max)
{
    int32_t n = 0;
    for (int32_t i = lower_bound(x, from); i < x->naborted && n < max; i++)
        if (x->aborted[i].first_offset < upto)
            out[n++] = x->aborted[i];
    return n;
}

int32_t kb_partition_txn_aborted_count(const kb_partition_txn *x)
{
    return x->naborted;
}

void kb_partition_txn_prune(kb_partition_txn *x, int64_t log_start)
{
    int32_t drop = lower_bound(x, log_start);
    if (drop == 0)
        return;
    memmove(x->aborted, x->aborted + drop, (size_t)(x->naborted - drop) * sizeof(*x->aborted));
    x->naborted -= drop;
}

kp_err kb_partition_txn_control_type(const uint8_t *batch, size_t len, int16_t *type)
{
    int32_t coordinator_epoch;
    return kb_partition_txn_marker(batch, len, type, &coordinator_epoch);
}

kp_err kb_partition_txn_marker(const uint8_t *batch, size_t len, int16_t *type, int32_t *coordinator_epoch)
{
    kp_batch_hdr h;
    if (len < KP_BATCH_HDR_SIZE || kp_batch_hdr_parse(batch, len, &h) != KP_ERR_NONE ||
        (h.attributes & KP_BATCH_ATTR_CODEC_MASK) != 0 || h.records_count < 1)
        return KP_ERR__CORRUPT;
    kp_record_iter it;
    kp_record rec;
    kp_records_iter_init(&it, batch + KP_BATCH_HDR_SIZE, len - KP_BATCH_HDR_SIZE, h.records_count);
    if (kp_records_next(&it, &rec) != KP_ERR_NONE || rec.key.len < 4)
        return KP_ERR__CORRUPT;
    *type = (int16_t)(((uint16_t)rec.key.p[2] << 8) | rec.key.p[3]);
    /* value: version (int16), coordinator epoch (int32) */
    *coordinator_epoch = rec.value.len >= 6 ? (int32_t)kp_be32_get(rec.value.p + 2) : -1;
    return KP_ERR_NONE;
}

kp_err kb_partition_txn_replay(kb_partition_txn *x, const kp_batch_hdr *h, const uint8_t *batch, size_t len)
{
    if (!(h->attributes & KP_BATCH_ATTR_TRANSACTIONAL) || h->producer_id < 0)
        return KP_ERR_NONE;
    if (!(h->attributes & KP_BATCH_ATTR_CONTROL))
        return kb_partition_txn_on_data(x, h->producer_id, h->base_offset);
    int16_t type;
    if (batch == NULL || kb_partition_txn_control_type(batch, len, &type) != KP_ERR_NONE)
        return KP_ERR_NONE; /* not a marker we can read: it ends nothing */
    if (type != KB_CONTROL_ABORT && type != KB_CONTROL_COMMIT)
        return KP_ERR_NONE;
    return kb_partition_txn_on_marker(x, h->producer_id, type == KB_CONTROL_COMMIT, h->base_offset);
}
