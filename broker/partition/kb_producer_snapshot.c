#include "kb_producer_snapshot.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_log.h"
#include "kp_batch.h"
#include "kp_crc32c.h"

#define SNAP_EXT ".snapshot"
#define ABORTED_EXT ".aborted"
#define TXNINDEX_EXT ".txnindex" /* Kafka's; made only when it has an entry */
#define ABORTED_VERSION 0
#define NAME_DIGITS 20
#define CRC_AT 2
#define BODY_AT 6 /* the CRC covers [BODY_AT, end) */

/* ---- encoding ------------------------------------------------------------ */

static void put16(uint8_t *p, int16_t v)
{
    p[0] = (uint8_t)((uint16_t)v >> 8);
    p[1] = (uint8_t)v;
}

static int16_t get16(const uint8_t *p)
{
    return (int16_t)(((uint16_t)p[0] << 8) | p[1]);
}

/* A buffer of header + n items of size each, version set; NULL on overflow. */
static uint8_t *frame_new(int16_t version, int32_t n, size_t size, size_t *len)
{
    if (n < 0 || (size_t)n > (KB_PRODUCER_SNAPSHOT_FILE_MAX - KB_PRODUCER_SNAPSHOT_HDR_SIZE) / size)
        return NULL;
    *len = KB_PRODUCER_SNAPSHOT_HDR_SIZE + (size_t)n * size;
    uint8_t *buf = malloc(*len);
    if (buf != NULL) {
        put16(buf, version);
        kp_be32_put(buf + BODY_AT, n);
    }
    return buf;
}

static void frame_seal(uint8_t *buf, size_t len)
{
    kp_be32_put(buf + CRC_AT, (int32_t)kp_crc32c(0, buf + BODY_AT, len - BODY_AT));
}

/* Checks a frame's version, CRC and size; *n gets its item count. */
static kp_err frame_check(const uint8_t *buf, size_t len, int16_t version, size_t size, int32_t *n)
{
    if (len < KB_PRODUCER_SNAPSHOT_HDR_SIZE || len > KB_PRODUCER_SNAPSHOT_FILE_MAX || get16(buf) != version)
        return KP_ERR__CORRUPT;
    if ((uint32_t)kp_be32_get(buf + CRC_AT) != kp_crc32c(0, buf + BODY_AT, len - BODY_AT))
        return KP_ERR__CORRUPT;
    int32_t count = kp_be32_get(buf + BODY_AT);
    if (count < 0 || (size_t)count != (len - KB_PRODUCER_SNAPSHOT_HDR_SIZE) / size ||
        (len - KB_PRODUCER_SNAPSHOT_HDR_SIZE) % size != 0)
        return KP_ERR__CORRUPT;
    *n = count;
    return KP_ERR_NONE;
}

/* One item's bytes <-> its struct (i: its index, for order checks). */
typedef void item_put_fn(uint8_t *p, const void *v, int32_t i);
typedef bool item_get_fn(const uint8_t *p, void *v, int32_t i);

typedef struct frame_kind {
    int16_t version;
    size_t size;     /* on disk */
    size_t mem_size; /* in memory */
    item_put_fn *put;
    item_get_fn *get;
} frame_kind;

static uint8_t *frame_encode(const frame_kind *k, const void *v, int32_t n, size_t *len)
{
    uint8_t *buf = frame_new(k->version, n, k->size, len);
    if (buf == NULL)
        return NULL;
    for (int32_t i = 0; i < n; i++)
        k->put(buf + KB_PRODUCER_SNAPSHOT_HDR_SIZE + (size_t)i * k->size,
               (const uint8_t *)v + (size_t)i * k->mem_size, i);
    frame_seal(buf, *len);
    return buf;
}

/* Checks the frame, then every item (a failing get is corruption). */
static kp_err frame_decode(const frame_kind *k, const uint8_t *buf, size_t len, void **out,
                           int32_t *n)
{
    *out = NULL;
    *n = 0;
    int32_t count;
    kp_err e = frame_check(buf, len, k->version, k->size, &count);
    if (e != KP_ERR_NONE || count == 0)
        return e;
    uint8_t *v = calloc((size_t)count, k->mem_size);
    if (v == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < count; i++) {
        if (!k->get(buf + KB_PRODUCER_SNAPSHOT_HDR_SIZE + (size_t)i * k->size, v + (size_t)i * k->mem_size,
                    i)) {
            free(v);
            return KP_ERR__CORRUPT;
        }
    }
    *out = v;
    *n = count;
    return KP_ERR_NONE;
}

static void entry_put(uint8_t *p, const void *arg, int32_t i)
{
    (void)i;
    const kb_producer_snapshot_entry *e = arg;
    kp_be64_put(p, e->producer_id);
    put16(p + 8, e->epoch);
    kp_be32_put(p + 10, e->last_seq);
    kp_be64_put(p + 14, e->last_offset);
    kp_be32_put(p + 22, e->offset_delta);
    kp_be64_put(p + 26, e->timestamp);
    kp_be32_put(p + 34, e->coordinator_epoch);
    kp_be64_put(p + 38, e->txn_first_offset);
}

/* Rejects values a sane writer never produces. */
static bool entry_get(const uint8_t *p, void *arg, int32_t i)
{
    (void)i;
    kb_producer_snapshot_entry *e = arg;
    *e = (kb_producer_snapshot_entry){kp_be64_get(p),      get16(p + 8),        kp_be32_get(p + 10),
                            kp_be64_get(p + 14), kp_be32_get(p + 22), kp_be64_get(p + 26),
                            kp_be32_get(p + 34), kp_be64_get(p + 38)};
    return e->producer_id >= 0 && e->offset_delta >= 0 && e->last_offset >= -1 &&
           (e->last_offset < 0 || e->offset_delta <= e->last_offset) &&
           e->txn_first_offset >= -1;
}

static void aborted_put(uint8_t *p, const void *arg, int32_t i)
{
    (void)i;
    const kb_aborted_txn *a = arg;
    kp_be64_put(p, a->producer_id);
    kp_be64_put(p + 8, a->first_offset);
    kp_be64_put(p + 16, a->last_offset);
}

/* kb_partition_txn invariant 2: first <= last, last strictly increasing. */
static bool aborted_get(const uint8_t *p, void *arg, int32_t i)
{
    kb_aborted_txn *a = arg;
    *a = (kb_aborted_txn){kp_be64_get(p), kp_be64_get(p + 8), kp_be64_get(p + 16)};
    return a->first_offset >= 0 && a->first_offset <= a->last_offset &&
           (i == 0 || a->last_offset > a[-1].last_offset);
}

static const frame_kind snapshot_kind = {KB_PRODUCER_SNAPSHOT_VERSION, KB_PRODUCER_SNAPSHOT_ENTRY_SIZE,
                                         sizeof(kb_producer_snapshot_entry), entry_put, entry_get};
static const frame_kind aborted_kind = {ABORTED_VERSION, KB_PRODUCER_SNAPSHOT_ABORTED_SIZE,
                                        sizeof(kb_aborted_txn), aborted_put, aborted_get};

uint8_t *kb_producer_snapshot_encode(const kb_producer_snapshot_entry *v, int32_t n, size_t *len)
{
    return frame_encode(&snapshot_kind, v, n, len);
}

kp_err kb_producer_snapshot_decode(const uint8_t *buf, size_t len, kb_producer_snapshot_entry **out, int32_t *n)
{
    return frame_decode(&snapshot_kind, buf, len, (void **)out, n);
}

uint8_t *kb_producer_snapshot_encode_aborted(const kb_aborted_txn *v, int32_t n, size_t *len)
{
    return frame_encode(&aborted_kind, v, n, len);
}

kp_err kb_producer_snapshot_decode_aborted(const uint8_t *buf, size_t len, kb_aborted_txn **out,
                                 int32_t *n)
{
    return frame_decode(&aborted_kind, buf, len, (void **)out, n);
}

/* ---- state <-> entries --------------------------------------------------- */

kp_err kb_producer_snapshot_collect(kb_producer_state *ps, kb_producer_snapshot_entry **out, int32_t *n)
{
    int32_t count = kb_producer_state_count(ps), k = 0;
    *out = NULL;
    *n = 0;
    if (count == 0)
        return KP_ERR_NONE;
    kb_producer_snapshot_entry *v = calloc((size_t)count, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    const kb_partition_txn *x = kb_producer_state_txns(ps);
    for (int32_t i = 0; i < count; i++) {
        kb_pid_info info;
        kb_pid_batch b;
        if (!kb_producer_state_at(ps, i, &info) || !kb_producer_state_last_batch(ps, i, &b))
            continue;
        int64_t txn_first = -1;
        if (!kb_partition_txn_open(x, info.producer_id, &txn_first))
            txn_first = -1;
        v[k++] = (kb_producer_snapshot_entry){info.producer_id, info.epoch, b.last_seq, b.last_offset,
                                    (int32_t)(b.last_offset - b.first_offset), info.last_timestamp,
                                    info.coordinator_epoch, txn_first};
    }
    *out = v;
    *n = k;
    return KP_ERR_NONE;
}

/* The first sequence of a batch ending at last_seq spanning delta more
 * (sequences wrap from INT32_MAX to 0, as Kafka's decrementSequence). */
static int32_t first_seq_of(int32_t last_seq, int32_t delta)
{
    if (last_seq >= delta)
        return last_seq - delta;
    return INT32_MAX - (delta - last_seq) + 1;
}

kp_err kb_producer_snapshot_apply(kb_producer_state *ps, const kb_producer_snapshot_entry *v, int32_t n)
{
    kb_partition_txn *x = kb_producer_state_txns(ps);
    for (int32_t i = 0; i < n; i++) {
        const kb_producer_snapshot_entry *e = &v[i];
        if (e->last_offset < 0 || e->last_seq < 0)
            continue; /* no batch known: the same as an untracked producer */
        kb_pid_batch b = {first_seq_of(e->last_seq, e->offset_delta), e->last_seq,
                          e->last_offset - e->offset_delta, e->last_offset, e->timestamp};
        kp_err err = kb_producer_state_record(ps, e->producer_id, e->epoch, &b);
        if (err == KP_ERR_NONE && e->txn_first_offset >= 0)
            err = kb_partition_txn_on_data(x, e->producer_id, e->txn_first_offset);
        if (err != KP_ERR_NONE)
            return err;
        kb_producer_state_on_marker(ps, e->producer_id, e->timestamp, e->coordinator_epoch);
    }
    return KP_ERR_NONE;
}

/* Aborted entries go in through the transaction index's own path: a data
 * batch opening the transaction, then its abort marker. */
static kp_err apply_aborted(kb_partition_txn *x, const kb_aborted_txn *v, int32_t n)
{
    kp_err e = KP_ERR_NONE;
    for (int32_t i = 0; i < n && e == KP_ERR_NONE; i++) {
        e = kb_partition_txn_on_data(x, v[i].producer_id, v[i].first_offset);
        if (e == KP_ERR_NONE)
            e = kb_partition_txn_on_marker(x, v[i].producer_id, false, v[i].last_offset);
    }
    return e;
}

/* ---- the directory ------------------------------------------------------- */

typedef struct snap_file {
    int64_t offset;
    bool aborted; /* the companion, not the .snapshot */
} snap_file;

typedef struct snap_list {
    snap_file *v;
    int32_t n;
    int32_t cap;
    bool nomem;
    bool txnindex; /* Kafka's aborted-transaction index files are here */
} snap_list;

void kb_producer_snapshot_name(int64_t offset, char out[KB_PRODUCER_SNAPSHOT_NAME_MAX])
{
    snprintf(out, KB_PRODUCER_SNAPSHOT_NAME_MAX, "%0*lld" SNAP_EXT, NAME_DIGITS, (long long)offset);
}

static void aborted_name(int64_t offset, char out[KB_PRODUCER_SNAPSHOT_NAME_MAX])
{
    snprintf(out, KB_PRODUCER_SNAPSHOT_NAME_MAX, "%0*lld" ABORTED_EXT, NAME_DIGITS, (long long)offset);
}

/* "<20 digits><ext>" exactly. */
static bool parse_name(const char *name, const char *ext, int64_t *offset)
{
    int64_t v = 0;
    for (int i = 0; i < NAME_DIGITS; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (name[i] - '0');
    }
    if (strcmp(name + NAME_DIGITS, ext) != 0)
        return false;
    *offset = v;
    return true;
}

static void list_cb(void *arg, const char *name)
{
    snap_list *l = arg;
    snap_file f = {0, false};
    int64_t base;
    if (parse_name(name, TXNINDEX_EXT, &base))
        l->txnindex = true;
    if (!parse_name(name, SNAP_EXT, &f.offset) && !(f.aborted = parse_name(name, ABORTED_EXT,
                                                                           &f.offset)))
        return;
    if (l->n == l->cap) {
        int32_t cap = l->cap ? l->cap * 2 : 8;
        snap_file *v = realloc(l->v, (size_t)cap * sizeof(*v));
        if (v == NULL) {
            l->nomem = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = f;
}

static int cmp_file(const void *a, const void *b)
{
    const snap_file *x = a, *y = b;
    if (x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return (int)x->aborted - (int)y->aborted;
}

/* The snapshot files of dir, oldest first. */
static kp_err list_files(const ks_io *io, const char *dir, snap_list *l, kp_errctx *ctx)
{
    memset(l, 0, sizeof(*l));
    kp_err e = ks_io_list_dir(io, dir, list_cb, l, ctx);
    if (e == KP_ERR_NONE && l->nomem)
        e = KP_ERR__NOMEM;
    if (e == KP_ERR_NONE && l->n > 1)
        qsort(l->v, (size_t)l->n, sizeof(*l->v), cmp_file);
    return e;
}

static bool has_file(const snap_list *l, int64_t offset, bool aborted)
{
    for (int32_t i = 0; i < l->n; i++)
        if (l->v[i].offset == offset && l->v[i].aborted == aborted)
            return true;
    return false;
}

static void remove_file(const ks_io *io, const char *dir, const snap_file *f)
{
    char name[KB_PRODUCER_SNAPSHOT_NAME_MAX], path[4096];
    if (f->aborted)
        aborted_name(f->offset, name);
    else
        kb_producer_snapshot_name(f->offset, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    (void)ks_io_unlink(io, path, NULL);
}

/* Reads dir/name whole (at most KB_PRODUCER_SNAPSHOT_FILE_MAX bytes). */
static kp_err read_whole(const ks_io *io, const char *dir, const char *name, uint8_t **buf,
                         size_t *len, kp_errctx *ctx)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd;
    kp_err e = ks_io_open(io, path, O_RDONLY, &fd, ctx);
    if (e != KP_ERR_NONE)
        return e;
    int64_t size = 0;
    e = ks_io_fsize(io, fd, &size, NULL, ctx);
    if (e == KP_ERR_NONE && (size < 0 || size > KB_PRODUCER_SNAPSHOT_FILE_MAX))
        e = KP_ERRCTX(ctx, KP_ERR__CORRUPT, 0, "%s: %lld bytes", path, (long long)size);
    *buf = NULL;
    if (e == KP_ERR_NONE && (*buf = malloc(size > 0 ? (size_t)size : 1)) == NULL)
        e = KP_ERR__NOMEM;
    if (e == KP_ERR_NONE)
        e = ks_io_read_all(io, fd, *buf, (size_t)size, 0, ctx);
    ks_io_close(io, fd);
    if (e != KP_ERR_NONE) {
        free(*buf);
        *buf = NULL;
    }
    *len = (size_t)size;
    return e;
}

/* Reads and decodes dir/name as a frame of kind k. */
static kp_err read_frame(const ks_io *io, const char *dir, const char *name, const frame_kind *k,
                         void **out, int32_t *n, kp_errctx *ctx)
{
    uint8_t *buf;
    size_t len;
    *out = NULL;
    *n = 0;
    kp_err e = read_whole(io, dir, name, &buf, &len, ctx);
    if (e != KP_ERR_NONE)
        return e;
    e = frame_decode(k, buf, len, out, n);
    free(buf);
    if (e == KP_ERR__CORRUPT)
        KP_ERRCTX(ctx, e, 0, "%s/%s: bad version, length, crc or value", dir, name);
    return e;
}

kp_err kb_producer_snapshot_read(const ks_io *io, const char *dir, int64_t offset, kb_producer_snapshot_entry **out,
                       int32_t *n, kp_errctx *ctx)
{
    char name[KB_PRODUCER_SNAPSHOT_NAME_MAX];
    kb_producer_snapshot_name(offset, name);
    return read_frame(io, dir, name, &snapshot_kind, (void **)out, n, ctx);
}

/* The companion of the snapshot at offset; none means no aborted ones. */
static kp_err read_aborted(const ks_io *io, const char *dir, int64_t offset, kb_aborted_txn **out,
                           int32_t *n, kp_errctx *ctx)
{
    char name[KB_PRODUCER_SNAPSHOT_NAME_MAX];
    aborted_name(offset, name);
    kp_err e = read_frame(io, dir, name, &aborted_kind, (void **)out, n, ctx);
    return e == KP_ERR__NOENT ? KP_ERR_NONE : e;
}

/* ---- writing ------------------------------------------------------------- */

/* One snapshot's files, encoded from the state on the loop and written
 * wherever (here, or on the flush thread at a roll). */
typedef struct snap_files {
    ks_io io;
    const char *dir;   /* the log's: it stays open while a write is pending */
    int64_t offset;
    int64_t log_start; /* for the prune after the write */
    uint8_t *snap;
    size_t snap_len;
    uint8_t *aborted;  /* NULL: no aborted transaction, the companion goes */
    size_t aborted_len;
    char topic[256];   /* for the failure line */
    int32_t partition;
} snap_files;

static void files_free(snap_files *sf)
{
    if (sf != NULL) {
        free(sf->snap);
        free(sf->aborted);
        free(sf);
    }
}

/* The companion's bytes: the aborted transactions below offset, NULL for none. */
static kp_err encode_aborted(kb_producer_state *ps, int64_t log_start, int64_t offset,
                             snap_files *sf)
{
    const kb_partition_txn *x = kb_producer_state_txns(ps);
    int32_t max = kb_partition_txn_aborted_count(x);
    if (max == 0)
        return KP_ERR_NONE;
    kb_aborted_txn *v = calloc((size_t)max, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    int32_t n = kb_partition_txn_aborted(x, log_start, offset, v, max);
    kp_err e = KP_ERR_NONE;
    if (n > 0) {
        sf->aborted = kb_producer_snapshot_encode_aborted(v, n, &sf->aborted_len);
        e = sf->aborted != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    free(v);
    return e;
}

/* Encodes the state at offset (no I/O). */
static kp_err files_encode(const ks_io *io, ks_log *log, kb_producer_state *ps, int64_t offset,
                           snap_files **out)
{
    snap_files *sf = calloc(1, sizeof(*sf));
    if (sf == NULL)
        return KP_ERR__NOMEM;
    *sf = (snap_files){.io = *io, .dir = ks_log_dir(log), .offset = offset,
                       .log_start = ks_log_start_offset(log), .partition = ks_log_partition(log)};
    snprintf(sf->topic, sizeof(sf->topic), "%s", ks_log_topic(log));
    kb_producer_snapshot_entry *v;
    int32_t n;
    kp_err e = kb_producer_snapshot_collect(ps, &v, &n);
    if (e == KP_ERR_NONE)
        e = encode_aborted(ps, sf->log_start, offset, sf);
    if (e == KP_ERR_NONE) {
        sf->snap = kb_producer_snapshot_encode(v, n, &sf->snap_len);
        e = sf->snap != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    free(v);
    if (e != KP_ERR_NONE) {
        files_free(sf);
        return e;
    }
    *out = sf;
    return KP_ERR_NONE;
}

static void prune(const ks_io *io, const char *dir, int64_t log_start);

/* Writes the companion (or removes a stale one) first, then the snapshot
 * (invariant 4), then prunes (invariant 5). Blocks on disk I/O. */
static kp_err files_write(const snap_files *sf, kp_errctx *ctx)
{
    char name[KB_PRODUCER_SNAPSHOT_NAME_MAX];
    aborted_name(sf->offset, name);
    kp_err e;
    if (sf->aborted == NULL) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", sf->dir, name);
        e = ks_io_unlink(&sf->io, path, ctx);
    } else {
        e = ks_io_write_file_atomic(&sf->io, sf->dir, name, sf->aborted, sf->aborted_len, ctx);
    }
    if (e == KP_ERR_NONE) {
        kb_producer_snapshot_name(sf->offset, name);
        e = ks_io_write_file_atomic(&sf->io, sf->dir, name, sf->snap, sf->snap_len, ctx);
    }
    if (e == KP_ERR_NONE)
        prune(&sf->io, sf->dir, sf->log_start);
    return e;
}

static void log_write_failure(const snap_files *sf, kp_err e, const kp_errctx *ctx)
{
    KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"cannot write producer snapshot\" topic=%s "
           "partition=%d offset=%lld error=%s detail=\"%s\"", sf->topic, sf->partition,
           (long long)sf->offset, kp_err_name(e), ctx->msg);
}

/* Invariant 5: drops snapshots below the log start, all but the newest
 * KB_PRODUCER_SNAPSHOT_KEEP, and companions whose snapshot is gone. */
static void prune(const ks_io *io, const char *dir, int64_t log_start)
{
    snap_list l;
    if (list_files(io, dir, &l, NULL) != KP_ERR_NONE) {
        free(l.v);
        return;
    }
    int32_t kept = 0;
    for (int32_t i = l.n - 1; i >= 0; i--) {
        const snap_file *f = &l.v[i];
        bool drop;
        if (f->aborted)
            drop = !has_file(&l, f->offset, false);
        else
            drop = f->offset < log_start || ++kept > KB_PRODUCER_SNAPSHOT_KEEP;
        if (drop) {
            remove_file(io, dir, f);
            if (!f->aborted)
                remove_file(io, dir, &(snap_file){f->offset, true});
        }
    }
    free(l.v);
}

kp_err kb_producer_snapshot_write(const ks_io *io, ks_log *log, kb_producer_state *ps, int64_t offset,
                        kp_errctx *ctx)
{
    snap_files *sf;
    kp_err e = files_encode(io, log, ps, offset, &sf);
    if (e == KP_ERR_NONE)
        e = files_write(sf, ctx);
    files_free(sf);
    return e;
}

void kb_producer_snapshot_prune(const ks_io *io, ks_log *log)
{
    prune(io, ks_log_dir(log), ks_log_start_offset(log));
}

/* Whether dir/<offset>.snapshot exists: then it already holds the state at
 * offset (files above the log end went at open, so the log below offset is
 * the one it was written from). */
static bool snapshot_exists(const ks_io *io, const char *dir, int64_t offset)
{
    char name[KB_PRODUCER_SNAPSHOT_NAME_MAX], path[4096];
    kb_producer_snapshot_name(offset, name);
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd;
    if (ks_io_open(io, path, O_RDONLY, &fd, NULL) != KP_ERR_NONE)
        return false;
    ks_io_close(io, fd);
    return true;
}

void kb_producer_snapshot_save(const ks_io *io, ks_log *log, kb_producer_state *ps, int64_t offset)
{
    /* an idle partition's clean stop costs no fsync */
    if (ps == NULL || snapshot_exists(io, ks_log_dir(log), offset))
        return;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    snap_files *sf;
    kp_err e = files_encode(io, log, ps, offset, &sf);
    if (e == KP_ERR_NONE) {
        e = files_write(sf, &ctx);
        if (e != KP_ERR_NONE)
            log_write_failure(sf, e, &ctx);
        files_free(sf);
    }
}

/* The flush thread's half of kb_producer_snapshot_save_at_roll. */
static void write_task(void *arg)
{
    snap_files *sf = arg;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    kp_err e = files_write(sf, &ctx);
    if (e != KP_ERR_NONE)
        log_write_failure(sf, e, &ctx);
    files_free(sf);
}

void kb_producer_snapshot_save_at_roll(const ks_io *io, ks_flush *f, ks_log *log,
                                       kb_producer_state *ps, int64_t offset)
{
    if (ps == NULL)
        return;
    snap_files *sf;
    kp_errctx ctx = {{0}, NULL, 0, 0};
    kp_err e = files_encode(io, log, ps, offset, &sf);
    if (e == KP_ERR_NONE && ks_flush_submit_task(f, log, write_task, sf, &ctx) != KP_ERR_NONE) {
        files_free(sf);
        e = KP_ERR__NOMEM;
    }
    if (e != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"cannot write producer snapshot\" topic=%s "
               "partition=%d offset=%lld error=%s", ks_log_topic(log), ks_log_partition(log),
               (long long)offset, kp_err_name(e));
}

/* ---- the open path ------------------------------------------------------- */

/* Loads the snapshot at offset (and its companion) into ps, or nothing. */
static kp_err load_one(const ks_io *io, const char *dir, int64_t offset, kb_producer_state *ps,
                       int32_t *producers, kp_errctx *ctx)
{
    kb_producer_snapshot_entry *v;
    kb_aborted_txn *a = NULL;
    int32_t n, na = 0;
    kp_err e = kb_producer_snapshot_read(io, dir, offset, &v, &n, ctx);
    if (e == KP_ERR_NONE)
        e = read_aborted(io, dir, offset, &a, &na, ctx);
    if (e == KP_ERR_NONE)
        e = apply_aborted(kb_producer_state_txns(ps), a, na);
    if (e == KP_ERR_NONE)
        e = kb_producer_snapshot_apply(ps, v, n);
    *producers = n;
    free(v);
    free(a);
    return e;
}

/* Deletes the files above the log end (invariant 2). */
static int32_t drop_above(const ks_io *io, const char *dir, const snap_list *l, int64_t end)
{
    int32_t dropped = 0;
    for (int32_t i = 0; i < l->n; i++) {
        if (l->v[i].offset > end) {
            remove_file(io, dir, &l->v[i]);
            dropped++;
        }
    }
    return dropped;
}

/* Tries the usable snapshots newest first; the offset loaded, or -1. */
static int64_t load_newest(const ks_io *io, ks_log *log, const snap_list *l, kb_producer_state *ps,
                           kb_producer_snapshot_report *rep, kp_err *err)
{
    const char *dir = ks_log_dir(log);
    int64_t start = ks_log_start_offset(log), end = ks_log_end_offset(log);
    for (int32_t i = l->n - 1; i >= 0; i--) {
        const snap_file *f = &l->v[i];
        if (f->aborted || f->offset < start || f->offset > end)
            continue;
        /* Kafka wrote this directory and knew aborted transactions: its
         * snapshots lack them (they are in .txnindex), only a scan finds them */
        if (l->txnindex && !has_file(l, f->offset, true))
            continue;
        kp_errctx ctx = {{0}, NULL, 0, 0};
        *err = load_one(io, dir, f->offset, ps, &rep->producers, &ctx);
        if (*err == KP_ERR_NONE)
            return f->offset;
        if (*err == KP_ERR__NOMEM)
            return -1; /* the open fails */
        /* corrupt, or unreadable (a directory, EIO): the log is the truth */
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"ignoring bad producer snapshot\" "
               "topic=%s partition=%d offset=%lld error=%s detail=\"%s\"", ks_log_topic(log),
               ks_log_partition(log), (long long)f->offset, kp_err_name(*err), ctx.msg);
        remove_file(io, dir, f);
        remove_file(io, dir, &(snap_file){f->offset, true});
        rep->deleted++;
        *err = KP_ERR_NONE;
        rep->producers = 0;
    }
    return -1;
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

kp_err kb_producer_snapshot_restore(const ks_io *io, ks_log *log, kb_producer_state *ps, kb_producer_snapshot_report *rep)
{
    int64_t t0 = mono_us();
    kb_producer_snapshot_report local;
    rep = rep != NULL ? rep : &local;
    *rep = (kb_producer_snapshot_report){-1, 0, 0, 0};
    snap_list l;
    kp_err e = list_files(io, ks_log_dir(log), &l, NULL);
    if (e != KP_ERR_NONE) {
        free(l.v);
        l = (snap_list){NULL, 0, 0, false, false}; /* unreadable: scan everything */
    }
    rep->deleted = drop_above(io, ks_log_dir(log), &l, ks_log_end_offset(log));
    e = KP_ERR_NONE;
    rep->snapshot_offset = load_newest(io, log, &l, ps, rep, &e);
    free(l.v);
    if (e != KP_ERR_NONE)
        return e;
    int64_t from = rep->snapshot_offset >= 0 ? rep->snapshot_offset : ks_log_start_offset(log);
    e = kb_producer_state_rebuild_from(ps, io, log, from, &rep->batches_scanned);
    if (e != KP_ERR_NONE)
        return e;
    kb_producer_state_keep_last(ps);
    KB_LOG(KB_LL_INFO, KB_SUB_STORAGE, "msg=\"producer state loaded\" topic=%s partition=%d "
               "snapshot_offset=%lld snapshot_producers=%d batches_scanned=%lld from=%lld "
               "log_end=%lld files_deleted=%d us=%lld", ks_log_topic(log), ks_log_partition(log),
               (long long)rep->snapshot_offset, rep->producers,
               (long long)rep->batches_scanned, (long long)from,
               (long long)ks_log_end_offset(log), rep->deleted, (long long)(mono_us() - t0));
    return KP_ERR_NONE;
}
