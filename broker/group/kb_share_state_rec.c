/* The records of __share_group_state (kb_share_state_rec.h). */
#include "kb_share_state_rec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_offsets.h"
#include "kb_uuid.h"
#include "kp_msg.h"

#define VALUE_VERSION 0
#define KEY_VERSION   0

void kb_share_state_write_key(kp_writer *w, kb_share_state_type type, kp_str group,
                              const kp_uuid *topic, int32_t partition)
{
    /* ShareSnapshotKey and ShareUpdateKey share one layout */
    kp_share_snapshot_key k = {.group_id = group, .topic_id = *topic, .partition = partition};
    kp_write_i16(w, (int16_t)type);
    kp_share_snapshot_key_encode(w, &k, KEY_VERSION);
}

static void write_snapshot(kp_writer *w, const kb_share_state_value *v, kp_arena *a)
{
    kp_share_snapshot_value s = {
        .snapshot_epoch = v->snapshot_epoch,
        .state_epoch = v->state_epoch,
        .leader_epoch = v->leader_epoch,
        .start_offset = v->start,
        .delivery_complete_count = v->delivery_complete_count,
        .create_timestamp = v->create_ts,
        .write_timestamp = v->write_ts,
    };
    s.state_batches.n = v->nbatches;
    s.state_batches.v = kp_arena_calloc(a, (size_t)v->nbatches + 1, sizeof(*s.state_batches.v));
    if (s.state_batches.v == NULL)
        return kp_writer_fail(w, KP_ERR__NOMEM);
    for (int32_t i = 0; i < v->nbatches; i++)
        s.state_batches.v[i] = (kp_share_snapshot_value_state_batch){
            v->batches[i].first, v->batches[i].last, v->batches[i].state,
            v->batches[i].delivery_count};
    kp_share_snapshot_value_encode(w, &s, VALUE_VERSION);
}

static void write_update(kp_writer *w, const kb_share_state_value *v, kp_arena *a)
{
    kp_share_update_value u = {
        .snapshot_epoch = v->snapshot_epoch,
        .leader_epoch = v->leader_epoch,
        .start_offset = v->start,
        .delivery_complete_count = v->delivery_complete_count,
    };
    u.state_batches.n = v->nbatches;
    u.state_batches.v = kp_arena_calloc(a, (size_t)v->nbatches + 1, sizeof(*u.state_batches.v));
    if (u.state_batches.v == NULL)
        return kp_writer_fail(w, KP_ERR__NOMEM);
    for (int32_t i = 0; i < v->nbatches; i++)
        u.state_batches.v[i] = (kp_share_update_value_state_batch){
            v->batches[i].first, v->batches[i].last, v->batches[i].state,
            v->batches[i].delivery_count};
    kp_share_update_value_encode(w, &u, VALUE_VERSION);
}

void kb_share_state_write_value(kp_writer *w, kb_share_state_type type,
                                const kb_share_state_value *v, kp_arena *a)
{
    kp_write_i16(w, VALUE_VERSION);
    if (type == KB_SHARE_STATE_SNAPSHOT)
        write_snapshot(w, v, a);
    else
        write_update(w, v, a);
}

kp_err kb_share_state_read_key(kp_slice key, kp_arena *a, kb_share_state_key *out)
{
    kp_reader r;
    int16_t type;
    memset(out, 0, sizeof(*out));
    if (!kb_offsets_read_version(key, &r, &type))
        return KP_ERR__CORRUPT;
    if (type != KB_SHARE_STATE_SNAPSHOT && type != KB_SHARE_STATE_UPDATE)
        return KP_ERR__NOENT;
    kp_share_snapshot_key k;
    if (kp_share_snapshot_key_decode(&r, a, &k, KEY_VERSION) != KP_ERR_NONE ||
        k.group_id.len < 0 || k.partition < 0)
        return KP_ERR__CORRUPT;
    *out = (kb_share_state_key){(kb_share_state_type)type, k.group_id, k.topic_id, k.partition};
    return KP_ERR_NONE;
}

/* Room for n batches in out; each is set by set_batch. */
static kp_err alloc_batches(kb_share_state_value *out, int32_t n, kp_arena *a)
{
    out->nbatches = n > 0 ? n : 0;
    out->batches = kp_arena_calloc(a, (size_t)out->nbatches + 1, sizeof(*out->batches));
    return out->batches != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
}

static bool set_batch(kb_share_state_batch *b, int64_t first, int64_t last, int8_t state,
                      int16_t count)
{
    *b = (kb_share_state_batch){first, last, state, count};
    return first <= last;
}

kp_err kb_share_state_read_value(kb_share_state_type type, kp_slice value, kp_arena *a,
                                 kb_share_state_value *out)
{
    kp_reader r;
    int16_t version;
    memset(out, 0, sizeof(*out));
    if (!kb_offsets_read_version(value, &r, &version) || version != VALUE_VERSION)
        return KP_ERR__CORRUPT;
    if (type == KB_SHARE_STATE_SNAPSHOT) {
        kp_share_snapshot_value s;
        kp_share_snapshot_value_defaults(&s);
        if (kp_share_snapshot_value_decode(&r, a, &s, version) != KP_ERR_NONE)
            return KP_ERR__CORRUPT;
        *out = (kb_share_state_value){s.snapshot_epoch, s.state_epoch, s.leader_epoch,
                                      s.start_offset, s.delivery_complete_count,
                                      s.create_timestamp, s.write_timestamp, NULL, 0};
        kp_err e = alloc_batches(out, s.state_batches.n, a);
        for (int32_t i = 0; e == KP_ERR_NONE && i < out->nbatches; i++) {
            const kp_share_snapshot_value_state_batch *b = &s.state_batches.v[i];
            if (!set_batch(&out->batches[i], b->first_offset, b->last_offset, b->delivery_state,
                           b->delivery_count))
                e = KP_ERR__CORRUPT;
        }
        return e;
    }
    kp_share_update_value u;
    kp_share_update_value_defaults(&u);
    if (kp_share_update_value_decode(&r, a, &u, version) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    *out = (kb_share_state_value){u.snapshot_epoch, -1, u.leader_epoch, u.start_offset,
                                  u.delivery_complete_count, -1, -1, NULL, 0};
    kp_err e = alloc_batches(out, u.state_batches.n, a);
    for (int32_t i = 0; e == KP_ERR_NONE && i < out->nbatches; i++) {
        const kp_share_update_value_state_batch *b = &u.state_batches.v[i];
        if (!set_batch(&out->batches[i], b->first_offset, b->last_offset, b->delivery_state,
                       b->delivery_count))
            e = KP_ERR__CORRUPT;
    }
    return e;
}

int32_t kb_share_state_partition_for(kp_str group, const kp_uuid *topic, int32_t partition,
                                     int32_t partitions)
{
    char id[23];
    const char *g = group.p != NULL ? group.p : "";
    kb_uuid_format(topic, id);
    /* Kafka's SharePartitionKey.asCoordinatorKey(): "group:topicId:partition" */
    int n = snprintf(NULL, 0, "%.*s:%s:%d", group.len, g, id, partition);
    char small[512];
    char *buf = n >= 0 && (size_t)n < sizeof(small) ? small : malloc((size_t)n + 1);
    if (buf == NULL || n < 0)
        return 0;
    snprintf(buf, (size_t)n + 1, "%.*s:%s:%d", group.len, g, id, partition);
    int32_t p = kb_offsets_partition_for((kp_str){buf, n}, partitions);
    if (buf != small)
        free(buf);
    return p;
}
