#include "kb_meta_batches.h"

#include <stdlib.h>

#include "kp_batch.h"
#include "kp_compress.h"
#include "kp_records.h"

/* A metadata record's value starts with its frame version, apiKey and
 * version as unsigned varints; a control record's key is version, type. */
static void classify(kb_meta_record *m)
{
    if (m->control) {
        kp_reader r = kp_reader_make(m->key.p, m->key.len > 0 ? (size_t)m->key.len : 0);
        int16_t version = kp_read_i16(&r);
        int16_t type = kp_read_i16(&r);
        m->version = r.err == KP_ERR_NONE ? version : -1;
        m->type = r.err == KP_ERR_NONE ? type : -1;
        return;
    }
    kp_reader r = kp_reader_make(m->value.p, m->value.len > 0 ? (size_t)m->value.len : 0);
    (void)kp_read_uvarint(&r); /* frame version */
    uint32_t type = kp_read_uvarint(&r);
    uint32_t version = kp_read_uvarint(&r);
    bool ok = r.err == KP_ERR_NONE && type <= INT16_MAX && version <= INT16_MAX;
    m->type = ok ? (int16_t)type : -1;
    m->version = ok ? (int16_t)version : -1;
}

static kp_err each_record(const kp_batch_hdr *h, const uint8_t *recs, size_t len,
                          kb_meta_record_fn *fn, void *arg, int64_t *n)
{
    kp_record_iter it;
    kp_records_iter_init(&it, recs, len, h->records_count);
    kp_record rec;
    kp_err e;
    while ((e = kp_records_next(&it, &rec)) == KP_ERR_NONE) {
        kb_meta_record m = {
            .offset = h->base_offset + rec.offset_delta,
            .epoch = h->partition_leader_epoch,
            .control = (h->attributes & KP_BATCH_ATTR_CONTROL) != 0,
            .key = rec.key,
            .value = rec.value,
        };
        classify(&m);
        fn(arg, &m);
        (*n)++;
    }
    return e == KP_ERR__NOENT ? KP_ERR_NONE : e;
}

static kp_err read_batch(const uint8_t *b, const kp_batch_hdr *h, kb_meta_record_fn *fn,
                         void *arg, int64_t *n)
{
    const uint8_t *recs = b + KP_BATCH_HDR_SIZE;
    size_t len = (size_t)kp_batch_total_size(h) - KP_BATCH_HDR_SIZE;
    int codec = h->attributes & KP_BATCH_ATTR_CODEC_MASK;
    if (codec == KP_CODEC_NONE)
        return each_record(h, recs, len, fn, arg, n);
    uint8_t *out = NULL;
    size_t out_len = 0;
    kp_errctx ctx;
    kp_err e = kp_decompress((kp_codec)codec, recs, len, KB_META_MAX_BATCH, &out, &out_len, &ctx);
    if (e == KP_ERR_NONE)
        e = each_record(h, out, out_len, fn, arg, n);
    free(out);
    return e == KP_ERR__NOMEM ? e : e == KP_ERR_NONE ? KP_ERR_NONE : KP_ERR__CORRUPT;
}

kp_err kb_meta_batches_read(const uint8_t *p, size_t len, kb_meta_pos *pos,
                            kb_meta_record_fn *fn, void *arg, int64_t *nrecords)
{
    *nrecords = 0;
    size_t at = 0;
    while (len - at >= KP_BATCH_HDR_SIZE) {
        kp_batch_hdr h;
        if (kp_batch_hdr_parse(p + at, len - at, &h) != KP_ERR_NONE)
            return KP_ERR__CORRUPT;
        int64_t total = kp_batch_total_size(&h);
        if ((size_t)total > len - at)
            break; /* cut by the byte limit: the next Fetch brings it whole */
        if (kp_batch_check(p + at, (size_t)total, &h) != KP_ERR_NONE)
            return KP_ERR__CORRUPT;
        if (kp_batch_last_offset(&h) >= pos->next_offset) {
            kp_err e = read_batch(p + at, &h, fn, arg, nrecords);
            if (e != KP_ERR_NONE)
                return e;
            pos->next_offset = kp_batch_last_offset(&h) + 1;
            pos->last_epoch = h.partition_leader_epoch;
        }
        at += (size_t)total;
    }
    return KP_ERR_NONE;
}
