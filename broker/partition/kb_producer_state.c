#include "kb_producer_state.h"

#include <stdlib.h>
#include <string.h>

#include "kb_logscan.h"
#include "kb_partition_txn.h"
#include "kp_batch.h"

typedef struct pid_entry {
    int64_t producer_id;
    int16_t epoch;
    int32_t nbatches;
    kb_pid_batch batches[KB_PID_CACHED_BATCHES]; /* oldest first */
    int64_t last_timestamp;    /* last batch's or marker's */
    int32_t coordinator_epoch; /* last marker's, -1 before one */
} pid_entry;

struct kb_producer_state {
    pid_entry *v;
    int32_t n;
    int32_t cap;
    kb_partition_txn *txns; /* the partition's open and aborted transactions */
};

kb_producer_state *kb_producer_state_new(void)
{
    kb_producer_state *ps = calloc(1, sizeof(kb_producer_state));
    if (ps != NULL && (ps->txns = kb_partition_txn_new()) == NULL) {
        free(ps);
        return NULL;
    }
    return ps;
}

void kb_producer_state_free(kb_producer_state *ps)
{
    if (ps == NULL)
        return;
    kb_partition_txn_free(ps->txns);
    free(ps->v);
    free(ps);
}

kb_partition_txn *kb_producer_state_txns(kb_producer_state *ps)
{
    return ps->txns;
}

int32_t kb_producer_state_count(const kb_producer_state *ps)
{
    return ps->n;
}

bool kb_producer_state_at(const kb_producer_state *ps, int32_t i, kb_pid_info *out)
{
    const pid_entry *e = &ps->v[i];
    if (e->nbatches == 0)
        return false;
    *out = (kb_pid_info){e->producer_id, e->epoch, e->batches[e->nbatches - 1].last_seq,
                         e->last_timestamp, e->coordinator_epoch};
    return true;
}

bool kb_producer_state_last_batch(const kb_producer_state *ps, int32_t i, kb_pid_batch *out)
{
    const pid_entry *e = &ps->v[i];
    if (e->nbatches == 0)
        return false;
    *out = e->batches[e->nbatches - 1];
    return true;
}

void kb_producer_state_keep_last(kb_producer_state *ps)
{
    for (int32_t i = 0; i < ps->n; i++) {
        pid_entry *e = &ps->v[i];
        if (e->nbatches > 1) {
            e->batches[0] = e->batches[e->nbatches - 1];
            e->nbatches = 1;
        }
    }
}

static pid_entry *find(const kb_producer_state *ps, int64_t producer_id)
{
    /* Few producers write to one partition; a linear scan is the fast path. */
    for (int32_t i = 0; i < ps->n; i++)
        if (ps->v[i].producer_id == producer_id)
            return &ps->v[i];
    return NULL;
}

static int32_t next_seq(int32_t seq)
{
    return seq == INT32_MAX ? 0 : seq + 1;
}

kp_err kb_producer_state_check(const kb_producer_state *ps, int64_t producer_id, int16_t epoch,
                         int32_t first_seq, int32_t last_seq, kb_pid_batch *dup)
{
    const pid_entry *e = find(ps, producer_id);
    if (e == NULL || e->nbatches == 0)
        return first_seq == 0 || e == NULL ? KP_ERR_NONE : KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    if (epoch < e->epoch)
        return KP_ERR_INVALID_PRODUCER_EPOCH;
    if (epoch > e->epoch)
        return first_seq == 0 ? KP_ERR_NONE : KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    for (int32_t i = 0; i < e->nbatches; i++) {
        if (e->batches[i].first_seq == first_seq && e->batches[i].last_seq == last_seq) {
            *dup = e->batches[i];
            return KP_ERR_DUPLICATE_SEQUENCE_NUMBER;
        }
    }
    if (first_seq != next_seq(e->batches[e->nbatches - 1].last_seq))
        return KP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    return KP_ERR_NONE;
}

kp_err kb_producer_state_record(kb_producer_state *ps, int64_t producer_id, int16_t epoch,
                          const kb_pid_batch *batch)
{
    pid_entry *e = find(ps, producer_id);
    if (e == NULL) {
        if (ps->n == ps->cap) {
            int32_t cap = ps->cap ? ps->cap * 2 : 4;
            pid_entry *v = realloc(ps->v, (size_t)cap * sizeof(*v));
            if (v == NULL)
                return KP_ERR__NOMEM;
            ps->v = v;
            ps->cap = cap;
        }
        e = &ps->v[ps->n++];
        memset(e, 0, sizeof(*e));
        e->producer_id = producer_id;
        e->epoch = epoch;
        e->coordinator_epoch = -1;
    }
    if (epoch != e->epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    if (e->nbatches == KB_PID_CACHED_BATCHES) {
        memmove(&e->batches[0], &e->batches[1], (KB_PID_CACHED_BATCHES - 1) * sizeof(e->batches[0]));
        e->nbatches--;
    }
    e->batches[e->nbatches++] = *batch;
    e->last_timestamp = batch->max_timestamp;
    return KP_ERR_NONE;
}

void kb_producer_state_on_marker(kb_producer_state *ps, int64_t producer_id, int64_t timestamp,
                           int32_t coordinator_epoch)
{
    pid_entry *e = find(ps, producer_id);
    if (e == NULL)
        return;
    e->last_timestamp = timestamp;
    e->coordinator_epoch = coordinator_epoch;
}

/* Records one batch header if it is from an idempotent producer. */
static kp_err replay_header(kb_producer_state *ps, const kp_batch_hdr *h)
{
    if (h->producer_id < 0 || h->base_sequence < 0 || (h->attributes & KP_BATCH_ATTR_CONTROL))
        return KP_ERR_NONE;
    int32_t last = h->base_sequence > INT32_MAX - h->last_offset_delta
                       ? h->last_offset_delta - (INT32_MAX - h->base_sequence) - 1
                       : h->base_sequence + h->last_offset_delta;
    kb_pid_batch b = {h->base_sequence, last, h->base_offset, kp_batch_last_offset(h),
                      h->max_timestamp};
    return kb_producer_state_record(ps, h->producer_id, h->producer_epoch, &b);
}

/* A control batch larger than this is not a transaction marker. */
#define MARKER_BATCH_MAX 4096

typedef struct replay_ctx {
    kb_producer_state *ps;
    const ks_io *io;
    int64_t batches; /* headers seen */
} replay_ctx;

/* Feeds the partition's transaction index, and the producer's last marker;
 * markers are read whole. */
static kp_err replay_txn(const replay_ctx *rc, const kp_batch_hdr *h, int64_t file_pos, int fd)
{
    if (!(h->attributes & KP_BATCH_ATTR_CONTROL))
        return kb_partition_txn_replay(rc->ps->txns, h, NULL, 0);
    int64_t total = kp_batch_total_size(h);
    uint8_t buf[MARKER_BATCH_MAX];
    if (total > MARKER_BATCH_MAX ||
        ks_io_read_all(rc->io, fd, buf, (size_t)total, file_pos, NULL) != KP_ERR_NONE)
        return kb_partition_txn_replay(rc->ps->txns, h, NULL, 0);
    int16_t type;
    int32_t coordinator_epoch;
    if (kb_partition_txn_marker(buf, (size_t)total, &type, &coordinator_epoch) == KP_ERR_NONE &&
        (type == KB_CONTROL_ABORT || type == KB_CONTROL_COMMIT))
        kb_producer_state_on_marker(rc->ps, h->producer_id, h->max_timestamp, coordinator_epoch);
    return kb_partition_txn_replay(rc->ps->txns, h, buf, (size_t)total);
}

static kp_err replay_cb(void *arg, const kp_batch_hdr *h, int64_t file_pos, int fd)
{
    replay_ctx *rc = arg;
    rc->batches++;
    kp_err e = replay_header(rc->ps, h);
    if (e == KP_ERR_NONE && (h->attributes & KP_BATCH_ATTR_TRANSACTIONAL))
        e = replay_txn(rc, h, file_pos, fd);
    return e;
}

kp_err kb_producer_state_rebuild_from(kb_producer_state *ps, const ks_io *io, ks_log *log, int64_t from,
                                int64_t *batches)
{
    replay_ctx rc = {ps, io, 0};
    kp_err e = kb_log_scan(io, log, from, replay_cb, &rc);
    if (batches != NULL)
        *batches = rc.batches;
    return e;
}

kp_err kb_producer_state_rebuild(kb_producer_state *ps, const ks_io *io, ks_log *log)
{
    return kb_producer_state_rebuild_from(ps, io, log, ks_log_start_offset(log), NULL);
}
