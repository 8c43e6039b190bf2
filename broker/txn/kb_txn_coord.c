#include "kb_txn_coord.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_coord_load.h"
#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_logscan.h"
#include "kb_offsets.h"
#include "kb_producer_state.h"
#include "kb_partition_log.h"
#include "kb_partition_txn.h"
#include "kb_replica.h"
#include "kp_batch.h"
#include "kp_records.h"
#include "ks_io.h"

#define PID_FILE       "runnel-producer-ids"
#define PID_BLOCK      1000
#define LOAD_BATCH_MAX (64 << 20) /* a state batch larger than this is corrupt */

/* Cluster mode: the markers of one ending transaction, some written here,
 * the others sent to their partitions' leaders with WriteTxnMarkers; the
 * transaction completes (kb_txns_tick) once every one is written. A job
 * replaced by a newer end of the same id is dead: freed once nothing is
 * owed to it. */
enum { MK_TODO = 0, MK_SENT = 1, MK_DONE = 2 };
typedef struct marker_job {
    struct marker_job *next;
    struct kb_txn_coord *c;
    char *id;
    int64_t pid;
    int16_t epoch;
    bool commit;
    bool dead;
    int32_t coordinator_epoch;
    int32_t n;
    kb_txn_tp *parts; /* topics owned */
    uint8_t *state;   /* MK_* per partition */
    int32_t sent;     /* callbacks owed */
    int32_t state_p;     /* the id's partition of __transaction_state */
    int64_t prepare_end; /* its log end after the Prepare* record */
    kb_hw_waiter hw;     /* linked while the ISR does not have that record yet */
    kb_topic *hw_topic;  /* the topic hw is linked on */
} marker_job;

typedef struct marker_ref {
    marker_job *job;
    int32_t i;
} marker_ref;

struct kb_txn_coord {
    kb_broker *b;
    kb_txns *txns;
    kb_timer tick;
    marker_job *jobs;
    kb_timer retry;    /* markers not yet written, sent again */
    kb_timer complete; /* a job finished: its transaction completes */
    /* cluster mode: producer id blocks from the controller */
    int64_t spare_start, spare_end; /* the prefetched next block; empty when equal */
    kb_timer pid_retry;
    bool cluster;         /* cluster mode: ids follow the partitions' leadership */
    kb_coord_parts parts; /* cluster mode: the partitions led here and their loads */
};

kb_txns *kb_txn_coord_txns(kb_broker *b)
{
    return b->txn_coord->txns;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- producer ids ------------------------------------------------------- */

/* Reserves the next block of ids: the file records the first id not yet reserved. */
static kp_err reserve_block(kb_broker *b)
{
    const char *dir = b->cfg->log_dirs.v[0];
    if (b->pid_block_end == 0) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, PID_FILE);
        FILE *f = fopen(path, "re");
        int64_t next = 0;
        if (f != NULL) {
            if (fscanf(f, "next=%" SCNd64, &next) != 1 || next < 0)
                next = 0;
            fclose(f);
        }
        b->next_pid = next;
        b->pid_block_end = next;
    }
    char body[64];
    int len = snprintf(body, sizeof(body), "next=%" PRId64 "\n", b->pid_block_end + PID_BLOCK);
    kp_err e = ks_io_write_file_atomic(kb_partition_log_io(b), dir, PID_FILE, body, (size_t)len, NULL);
    if (e == KP_ERR_NONE)
        b->pid_block_end += PID_BLOCK;
    return e;
}

static void ask_pids(kb_broker *b);

/* The controller's answer to AllocateProducerIds: the block in use when it
 * is exhausted, else the spare one. */
static void on_pids(kb_broker *b, int16_t error, int64_t start, int32_t len)
{
    kb_txn_coord *c = b->txn_coord;
    if (c == NULL)
        return;
    if (error != KP_ERR_NONE) {
        (void)kb_timer_arm(b->loop, &c->pid_retry, 500);
        return;
    }
    if (b->next_pid >= b->pid_block_end) {
        b->next_pid = start;
        b->pid_block_end = start + len;
    } else {
        c->spare_start = start;
        c->spare_end = start + len;
    }
}

static void ask_pids(kb_broker *b)
{
    if (b->hooks->alloc_pids(b, on_pids) != KP_ERR_NONE)
        (void)kb_timer_arm(b->loop, &b->txn_coord->pid_retry, 500);
}

static void on_pid_retry(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_txn_coord *c = arg;
    if (c->spare_start == c->spare_end)
        ask_pids(c->b);
}

/* Cluster mode, as Kafka's RPCProducerIdManager: ids from the controller's
 * blocks, the next block asked for once 90% of the current one is used;
 * COORDINATOR_LOAD_IN_PROGRESS (retriable) while no block is here. */
static kp_err cluster_next_pid(kb_broker *b, int64_t *pid)
{
    kb_txn_coord *c = b->txn_coord;
    if (b->next_pid >= b->pid_block_end && c->spare_start < c->spare_end) {
        b->next_pid = c->spare_start;
        b->pid_block_end = c->spare_end;
        c->spare_start = c->spare_end = 0;
    }
    if (b->next_pid >= b->pid_block_end) {
        ask_pids(b);
        return KP_ERR_COORDINATOR_LOAD_IN_PROGRESS;
    }
    *pid = b->next_pid++;
    int64_t left = b->pid_block_end - b->next_pid;
    if (c->spare_start == c->spare_end && left * 10 < PID_BLOCK)
        ask_pids(b);
    return KP_ERR_NONE;
}

kp_err kb_txn_coord_next_pid(kb_broker *b, int64_t *pid)
{
    if (b->hooks != NULL)
        return cluster_next_pid(b, pid);
    if (b->next_pid >= b->pid_block_end) {
        kp_err e = reserve_block(b);
        if (e != KP_ERR_NONE)
            return e;
    }
    *pid = b->next_pid++;
    return KP_ERR_NONE;
}

/* ---- __transaction_state ------------------------------------------------ */

kp_err kb_txn_coord_state_topic(kb_broker *b, kb_topic **out)
{
    kb_topic_config cfg[] = {{"cleanup.policy", "compact"},
                             {"compression.type", "uncompressed"},
                             {"segment.bytes", "104857600"}};
    return kb_topics_internal(b->topics, KP_STR_LIT(KB_TXN_COORD_STATE_TOPIC),
                              b->cfg->transaction_state_log_num_partitions, cfg,
                              sizeof(cfg) / sizeof(cfg[0]), out);
}

/* Appends one record (value NULL: a tombstone) to partition p of t. */
static kp_err append_record(kb_broker *b, kb_topic *t, int32_t p, const kp_writer *key,
                            const kp_writer *value)
{
    if (key->err != KP_ERR_NONE || (value != NULL && value->err != KP_ERR_NONE))
        return KP_ERR__NOMEM;
    return kb_partition_log_append_record(
        b, t, p, wall_ms(), (kp_slice){key->buf, (int32_t)key->len},
        value != NULL ? (kp_slice){value->buf, (int32_t)value->len} : (kp_slice){NULL, -1});
}

/* Writes the record of id (meta NULL: its tombstone). */
static kp_err write_state(kb_broker *b, const char *id, const kb_txn_meta *m,
                          const kb_txn_tp *parts, int32_t n)
{
    kb_topic *t;
    kp_err e = kb_txn_coord_state_topic(b, &t);
    if (e != KP_ERR_NONE)
        return e;
    kp_writer k, v;
    kp_arena a;
    kp_arena_init(&a);
    kp_writer_init(&k, 64);
    kp_writer_init(&v, 128);
    kb_txn_write_key(&k, id);
    if (m != NULL)
        kb_txn_write_value(&v, m, parts, n, &a);
    int32_t p = kb_offsets_partition_for(kp_str_from(id), t->npartitions);
    e = append_record(b, t, p, &k, m != NULL ? &v : NULL);
    kp_writer_fini(&k);
    kp_writer_fini(&v);
    kp_arena_fini(&a);
    if (e != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_GROUP, "msg=\"cannot write transaction state\" "
               "transactional_id=%s partition=%d error=%s", id, p, kp_err_name(e));
    return e;
}

static kp_err env_persist(void *ctx, const char *id, const kb_txn_meta *m, const kb_txn_tp *parts,
                          int32_t n)
{
    return write_state(((kb_txn_coord *)ctx)->b, id, m, parts, n);
}

static kp_err env_tombstone(void *ctx, const char *id)
{
    return write_state(((kb_txn_coord *)ctx)->b, id, NULL, NULL, 0);
}

static kp_err env_new_pid(void *ctx, int64_t *pid)
{
    return kb_txn_coord_next_pid(((kb_txn_coord *)ctx)->b, pid);
}

static int64_t env_wall(void *ctx)
{
    (void)ctx;
    return wall_ms();
}

/* ---- markers ------------------------------------------------------------ */

/* A control batch: key = version 0 + type, value = version 0 + coordinator epoch. */
static uint8_t *marker_batch(int64_t pid, int16_t epoch, bool commit, int32_t coordinator_epoch,
                             int64_t now, size_t *len)
{
    uint8_t key[4] = {0, 0, 0, commit ? KB_CONTROL_COMMIT : KB_CONTROL_ABORT};
    uint8_t value[6] = {0, 0};
    kp_be32_put(value + 2, coordinator_epoch);
    kp_batch_builder bb;
    kp_batch_builder_init(&bb, 0, KP_BATCH_ATTR_TRANSACTIONAL | KP_BATCH_ATTR_CONTROL, pid, epoch,
                          -1);
    kp_batch_builder_add(&bb, now, (kp_slice){key, 4}, (kp_slice){value, 6}, NULL, 0);
    uint8_t *buf = kp_batch_builder_finish(&bb, len);
    kp_batch_builder_fini(&bb);
    return buf;
}

/* Appends the marker of (pid, epoch) to partition p of t and tells the
 * partition's transaction index, its producer state and, for
 * __consumer_offsets, the group coordinator. */
static kp_err append_marker(kb_broker *b, kb_topic *t, int32_t p, int64_t pid, int16_t epoch,
                            bool commit, int32_t coordinator_epoch)
{
    size_t len;
    int64_t now = wall_ms();
    uint8_t *buf = marker_batch(pid, epoch, commit, coordinator_epoch, now, &len);
    if (buf == NULL)
        return KP_ERR__NOMEM;
    ks_append_result res;
    kp_err e = kb_partition_log_append(b, t, p, buf, len, &res);
    free(buf);
    if (e != KP_ERR_NONE)
        return e;
    kb_partition *part = &t->partitions[p];
    if (part->pids != NULL) {
        (void)kb_partition_txn_on_marker(kb_producer_state_txns(part->pids), pid, commit,
                                         res.base_offset);
        kb_producer_state_on_marker(part->pids, pid, now, coordinator_epoch);
    }
    if (strcmp(t->name, KB_GROUP_COORD_OFFSETS_TOPIC) == 0)
        kb_group_coord_txn_end(b, pid, p, commit);
    kb_partition_log_appended(b, t, p); /* read_committed fetches wait on the LSO */
    return KP_ERR_NONE;
}

static kp_err write_marker(kb_broker *b, const kb_txn *txn, bool commit, kb_topic *t, int32_t p)
{
    kb_topic *state;
    kp_err e = kb_txn_coord_state_topic(b, &state);
    if (e != KP_ERR_NONE)
        return e;
    int32_t sp = kb_offsets_partition_for(kp_str_from(txn->id), state->npartitions);
    return append_marker(b, t, p, txn->m.producer_id, txn->m.producer_epoch, commit,
                         state->partitions[sp].leader_epoch);
}

/* Kafka's checks of a marker from WriteTxnMarkers against what the
 * partition knows of the producer: an older epoch is fenced, and so is an
 * older coordinator. */
static int16_t marker_allowed(const kb_partition *part, int64_t pid, int16_t epoch,
                              int32_t coordinator_epoch)
{
    kb_pid_info info;
    int32_t n = part->pids != NULL ? kb_producer_state_count(part->pids) : 0;
    for (int32_t i = 0; i < n; i++) {
        if (!kb_producer_state_at(part->pids, i, &info) || info.producer_id != pid)
            continue;
        if (epoch < info.epoch)
            return KP_ERR_INVALID_PRODUCER_EPOCH;
        if (coordinator_epoch < info.coordinator_epoch)
            return KP_ERR_TRANSACTION_COORDINATOR_FENCED;
        break;
    }
    return KP_ERR_NONE;
}

int16_t kb_txn_coord_write_marker(kb_broker *b, kb_topic *t, int32_t p, int64_t pid,
                                  int16_t epoch, bool commit, int32_t coordinator_epoch)
{
    ks_log *log;
    kp_err e = kb_partition_log_get(b, t, p, &log);
    if (e != KP_ERR_NONE)
        return kp_err_to_wire(e);
    int16_t err = marker_allowed(&t->partitions[p], pid, epoch, coordinator_epoch);
    if (err != KP_ERR_NONE)
        return err;
    return kp_err_to_wire(append_marker(b, t, p, pid, epoch, commit, coordinator_epoch));
}

/* Whether a partition of txn is still loading: its markers then wait (the
 * transaction stays in Prepare*, completed once the logs are online), so
 * none is written to some partitions and not to others. */
static bool markers_must_wait(kb_broker *b, const kb_txn *txn)
{
    for (int32_t i = 0; i < txn->nparts; i++) {
        kb_topic *t = kb_topics_find(b->topics, kp_str_from(txn->parts[i].topic));
        if (t != NULL && kb_partition_log_loading(t, txn->parts[i].partition))
            return true;
    }
    return false;
}

static kp_err local_markers(kb_broker *b, const kb_txn *txn, bool commit)
{
    if (markers_must_wait(b, txn))
        return KP_ERR_NOT_LEADER_OR_FOLLOWER;
    for (int32_t i = 0; i < txn->nparts; i++) {
        kb_topic *t = kb_topics_find(b->topics, kp_str_from(txn->parts[i].topic));
        int32_t p = txn->parts[i].partition;
        if (t == NULL || p < 0 || p >= t->npartitions)
            continue; /* deleted since: nothing to mark */
        kp_err e = write_marker(b, txn, commit, t, p);
        if (e != KP_ERR_NONE) {
            KB_LOG(KB_LL_WARN, KB_SUB_GROUP, "msg=\"cannot write transaction marker\" "
                   "transactional_id=%s topic=%s partition=%d error=%s", txn->id, t->name, p,
                   kp_err_name(e));
            return e;
        }
    }
    return KP_ERR_NONE;
}

/* ---- markers in cluster mode -------------------------------------------- */

static void job_free(marker_job *j)
{
    if (j->hw_topic != NULL && j->hw.linked)
        kb_replica_wait_cancel(j->hw_topic, j->state_p, &j->hw);
    for (int32_t i = 0; i < j->n; i++)
        free((char *)j->parts[i].topic);
    free(j->parts);
    free(j->state);
    free(j->id);
    free(j);
}

static void job_unlink(kb_txn_coord *c, marker_job *j)
{
    for (marker_job **pp = &c->jobs; *pp != NULL; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            return;
        }
}

/* Retires j: freed now, or once its last callback came back. */
static void job_retire(kb_txn_coord *c, marker_job *j)
{
    job_unlink(c, j);
    j->dead = true;
    if (j->sent == 0)
        job_free(j);
}

static bool job_done(const marker_job *j)
{
    for (int32_t i = 0; i < j->n; i++)
        if (j->state[i] != MK_DONE)
            return false;
    return true;
}

static void on_remote_marker(void *arg, int16_t error)
{
    marker_ref *ref = arg;
    marker_job *j = ref->job;
    int32_t i = ref->i;
    free(ref);
    j->sent--;
    if (j->dead) {
        if (j->sent == 0)
            job_free(j);
        return;
    }
    kb_txn_coord *c = j->c;
    /* A deleted partition has nothing to mark (Kafka drops its marker). */
    if (error == KP_ERR_NONE || error == KP_ERR_UNKNOWN_TOPIC_OR_PARTITION) {
        j->state[i] = MK_DONE;
        if (job_done(j))
            (void)kb_timer_arm(c->b->loop, &c->complete, 0);
        return;
    }
    KB_LOG(KB_LL_DEBUG, KB_SUB_GROUP, "msg=\"transaction marker to retry\" transactional_id=%s "
           "topic=%s partition=%d error=%s", j->id, j->parts[i].topic, j->parts[i].partition,
           kp_err_name(error));
    j->state[i] = MK_TODO; /* NOT_LEADER_OR_FOLLOWER and the like: to the leader it is now */
    if (!kb_timer_armed(&c->retry))
        (void)kb_timer_arm(c->b->loop, &c->retry, 100);
}

static void job_pump(kb_txn_coord *c, marker_job *j);

static void on_prepare_hw(kb_hw_waiter *w, int16_t err)
{
    marker_job *j = w->arg;
    j->hw_topic = NULL;
    if (err != KP_ERR_NONE)
        return; /* no longer the leader: the partition unloads, retiring j */
    job_pump(j->c, j);
    if (job_done(j))
        (void)kb_timer_arm(j->c->b->loop, &j->c->complete, 0);
}

/* Markers go out only once the ISR has the Prepare* record announcing them,
 * as Kafka's coordinator sends them after that append completed: a
 * coordinator that dies first leaves no marker its successor (which then
 * finds the transaction Ongoing) could contradict. */
static bool prepare_replicated(kb_txn_coord *c, marker_job *j)
{
    if (j->hw.linked)
        return false;
    kb_topic *t;
    if (kb_txn_coord_state_topic(c->b, &t) != KP_ERR_NONE || j->state_p >= t->npartitions)
        return true;
    ks_log *log = t->partitions[j->state_p].log;
    if (log == NULL || ks_log_high_watermark(log) >= j->prepare_end)
        return true;
    j->hw = (kb_hw_waiter){.offset = j->prepare_end, .fn = on_prepare_hw, .arg = j};
    if (!kb_replica_wait_hw(t, j->state_p, &j->hw))
        return true;
    j->hw_topic = t;
    return false;
}

/* Writes or sends every marker of j still to do. */
static void job_pump(kb_txn_coord *c, marker_job *j)
{
    kb_broker *b = c->b;
    bool again = false;
    if (!prepare_replicated(c, j))
        return;
    for (int32_t i = 0; i < j->n; i++) {
        if (j->state[i] != MK_TODO)
            continue;
        const char *topic = j->parts[i].topic;
        int32_t p = j->parts[i].partition;
        int32_t leader = b->hooks->leader(b, topic, p);
        kb_topic *t = kb_topics_find(b->topics, kp_str_from(topic));
        if (leader == b->node_id && t != NULL && p >= 0 && p < t->npartitions) {
            if (kb_partition_log_loading(t, p)) {
                again = true;
                continue;
            }
            kp_err e = append_marker(b, t, p, j->pid, j->epoch, j->commit, j->coordinator_epoch);
            if (e == KP_ERR_NONE)
                j->state[i] = MK_DONE;
            else
                again = true;
            continue;
        }
        marker_ref *ref = leader >= 0 ? malloc(sizeof(*ref)) : NULL;
        if (ref == NULL) {
            again = true; /* no leader now */
            continue;
        }
        *ref = (marker_ref){j, i};
        if (b->hooks->send_marker(b, leader, topic, p, j->pid, j->epoch, j->commit,
                                  j->coordinator_epoch, on_remote_marker, ref) != KP_ERR_NONE) {
            free(ref);
            again = true;
            continue;
        }
        j->state[i] = MK_SENT;
        j->sent++;
    }
    if (again && !kb_timer_armed(&c->retry))
        (void)kb_timer_arm(b->loop, &c->retry, 100);
}

static void on_marker_retry(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_txn_coord *c = arg;
    for (marker_job *j = c->jobs; j != NULL; j = j->next)
        job_pump(c, j);
    for (marker_job *j = c->jobs; j != NULL; j = j->next)
        if (job_done(j)) {
            (void)kb_timer_arm(c->b->loop, &c->complete, 0);
            break;
        }
}

/* Some job has every marker written: kb_txns_tick completes its
 * transaction (env_markers then answers NONE and retires the job). */
static void on_job_complete(kb_loop *loop, void *arg)
{
    (void)loop;
    kb_txn_coord *c = arg;
    (void)kb_txns_tick(c->txns);
}

static marker_job *job_new(kb_txn_coord *c, const kb_txn *txn, bool commit)
{
    marker_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->c = c;
    j->id = strdup(txn->id);
    j->parts = calloc((size_t)txn->nparts + 1, sizeof(*j->parts));
    j->state = calloc((size_t)txn->nparts + 1, 1);
    if (j->id == NULL || j->parts == NULL || j->state == NULL) {
        job_free(j);
        return NULL;
    }
    for (int32_t i = 0; i < txn->nparts; i++) {
        j->parts[i].topic = strdup(txn->parts[i].topic);
        j->parts[i].partition = txn->parts[i].partition;
        j->n = i + 1;
        if (j->parts[i].topic == NULL) {
            job_free(j);
            return NULL;
        }
    }
    j->pid = txn->m.producer_id;
    j->epoch = txn->m.producer_epoch;
    j->commit = commit;
    kb_topic *state;
    if (kb_txn_coord_state_topic(c->b, &state) == KP_ERR_NONE) {
        int32_t sp = kb_offsets_partition_for(kp_str_from(txn->id), state->npartitions);
        j->coordinator_epoch = state->partitions[sp].leader_epoch;
        j->state_p = sp;
        ks_log *log = state->partitions[sp].log;
        j->prepare_end = log != NULL ? ks_log_end_offset(log) : 0;
    }
    j->next = c->jobs;
    c->jobs = j;
    return j;
}

/* Cluster mode: NONE once every marker of txn's end is written, else
 * NOT_LEADER_OR_FOLLOWER (the transaction stays in Prepare*, completed when
 * the last marker is in). */
static kp_err cluster_markers(kb_txn_coord *c, const kb_txn *txn, bool commit)
{
    marker_job *j = c->jobs;
    while (j != NULL && strcmp(j->id, txn->id) != 0)
        j = j->next;
    if (j != NULL && (j->pid != txn->m.producer_id || j->epoch != txn->m.producer_epoch ||
                      j->commit != commit)) {
        job_retire(c, j);
        j = NULL;
    }
    if (j == NULL && (j = job_new(c, txn, commit)) == NULL)
        return KP_ERR__NOMEM;
    job_pump(c, j);
    if (!job_done(j))
        return KP_ERR_NOT_LEADER_OR_FOLLOWER;
    job_retire(c, j);
    return KP_ERR_NONE;
}

static kp_err env_markers(void *ctx, const kb_txn *txn, bool commit)
{
    kb_txn_coord *c = ctx;
    return c->b->hooks != NULL ? cluster_markers(c, txn, commit) : local_markers(c->b, txn, commit);
}

/* ---- produce-side checks ------------------------------------------------ */

/* Produce v12+ (transactions v2) adds the partition to the producer's
 * transaction itself, as Kafka's leader does through the coordinator;
 * a retriable NOT_ENOUGH_REPLICAS while the previous transaction ends. */
static int16_t implicit_add(kb_broker *b, const kb_txn *txn, int64_t pid, int16_t epoch,
                            const kb_topic *t, int32_t partition)
{
    kb_txn_tp tp = {t->name, partition};
    kp_err e = kb_txn_add_partitions_tv(b->txn_coord->txns, kp_str_from(txn->id), pid, epoch, &tp,
                                        1, KB_TXN_TV2);
    if (e == KP_ERR_CONCURRENT_TRANSACTIONS || e == KP_ERR_COORDINATOR_NOT_AVAILABLE)
        return KP_ERR_NOT_ENOUGH_REPLICAS;
    return kp_err_to_wire(e);
}

int16_t kb_txn_coord_verify(kb_broker *b, kp_str txn_id, int64_t pid, int16_t epoch,
                         const kb_topic *t, int32_t partition, int16_t produce_version)
{
    kb_txns *ts = b->txn_coord->txns;
    const kb_txn *txn = txn_id.len >= 0 ? kb_txns_find(ts, txn_id) : kb_txns_find_pid(ts, pid);
    kp_err e = kb_txn_check_producer(txn, pid, epoch);
    if (e == KP_ERR_PRODUCER_FENCED)
        return KP_ERR_INVALID_PRODUCER_EPOCH; /* what producers expect here */
    if (e == KP_ERR_CONCURRENT_TRANSACTIONS && produce_version >= 12)
        return KP_ERR_NOT_ENOUGH_REPLICAS;
    if (e != KP_ERR_NONE)
        return (int16_t)e;
    if (kb_txn_has_partition(txn, t->name, partition))
        return KP_ERR_NONE;
    if (produce_version >= 12)
        return implicit_add(b, txn, pid, epoch, t, partition);
    /* Kafka's verification: TRANSACTION_ABORTABLE from Produce v11, which
     * knows it; older versions get INVALID_TXN_STATE. */
    return produce_version >= 11 ? KP_ERR_TRANSACTION_ABORTABLE : KP_ERR_INVALID_TXN_STATE;
}

void kb_txn_coord_appended(kb_broker *b, kb_topic *t, int32_t partition, int64_t pid,
                        int64_t base_offset)
{
    (void)b;
    kb_partition *part = &t->partitions[partition];
    if (part->pids != NULL &&
        kb_partition_txn_on_data(kb_producer_state_txns(part->pids), pid, base_offset) != KP_ERR_NONE)
        KB_LOG(KB_LL_ERROR, KB_SUB_GROUP, "msg=\"out of memory tracking a transaction\" "
               "topic=%s partition=%d", t->name, partition);
}

int64_t kb_txn_coord_lso(kb_broker *b, kb_topic *t, int32_t partition, ks_log *log)
{
    (void)b;
    int64_t hw = ks_log_high_watermark(log);
    kb_partition *part = &t->partitions[partition];
    return part->pids != NULL ? kb_partition_txn_lso(kb_producer_state_txns(part->pids), hw) : hw;
}

/* ---- timers ------------------------------------------------------------- */

static void on_tick(kb_loop *loop, void *arg)
{
    kb_txn_coord *c = arg;
    int32_t n = kb_txns_tick(c->txns);
    if (n > 0)
        KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"timed-out transactions aborted\" count=%d", n);
    (void)kb_timer_arm(loop, &c->tick,
                       c->b->cfg->transaction_abort_timed_out_transaction_cleanup_interval_ms);
}

/* Every partition log is online: completes the transactions whose markers
 * waited for one (kb_txns_tick completes every Prepare*). */
static void on_logs_loaded(void *arg)
{
    kb_txn_coord *c = arg;
    (void)kb_txns_tick(c->txns);
}

/* ---- loading ------------------------------------------------------------ */

static kp_err load_record(void *arg, const kp_record *rec, kp_arena *a)
{
    kb_txn_coord *c = arg;
    kp_str id;
    kp_transaction_log_value v;
    kp_err e = kb_txn_read_key(rec->key, a, &id);
    if (e == KP_ERR_NONE && rec->value.len >= 0)
        e = kb_txn_read_value(rec->value, a, &v);
    if (e == KP_ERR_NONE)
        e = kb_txns_load(c->txns, id, rec->value.len >= 0 ? &v : NULL, a);
    return e;
}

static kp_err load_all(kb_txn_coord *c, char *err, size_t errlen)
{
    kb_broker *b = c->b;
    kb_topic *t = kb_topics_find(b->topics, KP_STR_LIT(KB_TXN_COORD_STATE_TOPIC));
    if (t == NULL)
        return KP_ERR_NONE;
    kb_replay_counts ld = {0, 0};
    int32_t p = 0;
    kp_err e = kb_partition_log_replay_records(b, t, LOAD_BATCH_MAX, load_record, c, &ld, &p);
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "cannot load %s-%d: %s", KB_TXN_COORD_STATE_TOPIC, p,
                 kp_err_name(e));
        return KP_ERR__IO;
    }
    kb_txns_load_done(c->txns);
    KB_LOG(KB_LL_INFO, KB_SUB_GROUP,
           "msg=\"transactions loaded\" transactional_ids=%zu records=%lld skipped=%lld",
           kb_txns_count(c->txns), (long long)ld.records, (long long)ld.skipped);
    return KP_ERR_NONE;
}

/* ---- cluster mode: partitions that move ------------------------------- */

/* The partition of __transaction_state that holds id (-1: no topic). */
static int32_t partition_of(const kb_txn_coord *c, const char *id)
{
    kb_topic *t = kb_topics_find(c->b->topics, KP_STR_LIT(KB_TXN_COORD_STATE_TOPIC));
    return t != NULL ? kb_offsets_partition_for(kp_str_from(id), t->npartitions) : -1;
}

/* Drops the transactional ids of partition p and their marker jobs: another
 * broker coordinates them now and completes what they left in Prepare*. */
static void unload_partition(void *arg, int32_t p)
{
    kb_txn_coord *c = arg;
    for (marker_job *j = c->jobs, *next; j != NULL; j = next) {
        next = j->next;
        if (partition_of(c, j->id) == p)
            job_retire(c, j);
    }
    size_t cur = 0, n = 0;
    kb_txn **mine = calloc(kb_txns_count(c->txns) + 1, sizeof(*mine));
    for (kb_txn *t; mine != NULL && (t = kb_txns_next(c->txns, &cur)) != NULL;)
        if (partition_of(c, t->id) == p)
            mine[n++] = t;
    for (size_t i = 0; i < n; i++)
        kb_txns_remove(c->txns, mine[i]);
    free(mine);
    KB_LOG(KB_LL_INFO, KB_SUB_GROUP, "msg=\"transactional ids unloaded\" partition=%d "
           "transactional_ids=%zu", p, n);
}

static void *load_begin(void *arg, int32_t p)
{
    (void)p;
    kb_record_replay *rr = calloc(1, sizeof(*rr));
    if (rr != NULL)
        *rr = (kb_record_replay){.cb = load_record, .arg = arg};
    return rr;
}

/* A partition loaded: what it left in Prepare* is completed (its markers
 * written), as Kafka's coordinator does on load; Ongoing transactions are
 * aborted once past their timeout by the tick. */
static void load_end(void *arg, void *state, int32_t p, kp_err err)
{
    kb_txn_coord *c = arg;
    if (err == KP_ERR_NONE)
        kb_txns_load_done(c->txns);
    else
        unload_partition(c, p);
    free(state);
}

kb_coord_parts *kb_txn_coord_parts(kb_broker *b)
{
    kb_txn_coord *c = b->txn_coord;
    return c != NULL && c->cluster ? &c->parts : NULL;
}

/* ---- start and stop ----------------------------------------------------- */

kp_err kb_txn_coord_start(kb_broker *b, char *err, size_t errlen)
{
    kb_txn_coord *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        snprintf(err, errlen, "out of memory");
        return KP_ERR__NOMEM;
    }
    kb_txn_env env = {
        .persist = env_persist,
        .tombstone = env_tombstone,
        .markers = env_markers,
        .new_pid = env_new_pid,
        .wall_ms = env_wall,
        .ctx = c,
        .max_timeout_ms = b->cfg->transaction_max_timeout_ms,
        .id_expiration_ms = b->cfg->transactional_id_expiration_ms,
    };
    c->b = b;
    c->txns = kb_txns_new(&env);
    b->txn_coord = c;
    if (c->txns == NULL) {
        snprintf(err, errlen, "out of memory");
        return KP_ERR__NOMEM;
    }
    kb_timer_init(&c->tick, on_tick, c);
    kb_timer_init(&c->retry, on_marker_retry, c);
    kb_timer_init(&c->complete, on_job_complete, c);
    kb_timer_init(&c->pid_retry, on_pid_retry, c);
    (void)kb_timer_arm(b->loop, &c->tick,
                       b->cfg->transaction_abort_timed_out_transaction_cleanup_interval_ms);
    kb_partition_log_set_loaded_hook(b, on_logs_loaded, c);
    if (!kb_config_cluster_mode(b->cfg))
        return load_all(c, err, errlen);
    /* cluster mode: the ids of a partition load when this broker leads it */
    c->cluster = true;
    c->parts = (kb_coord_parts){.b = b, .topic = KB_TXN_COORD_STATE_TOPIC,
                                .max_batch = LOAD_BATCH_MAX, .begin = load_begin,
                                .batch = kb_partition_log_replay_batch, .loaded = load_end,
                                .unload = unload_partition, .arg = c};
    return KP_ERR_NONE;
}

void kb_txn_coord_stop(kb_broker *b)
{
    kb_txn_coord *c = b->txn_coord;
    if (c == NULL)
        return;
    kb_timer_disarm(b->loop, &c->tick);
    kb_timer_disarm(b->loop, &c->retry);
    kb_timer_disarm(b->loop, &c->complete);
    kb_timer_disarm(b->loop, &c->pid_retry);
    kb_coord_parts_fini(&c->parts);
    while (c->jobs != NULL) { /* the inter-broker connections are gone: nothing is owed */
        marker_job *j = c->jobs;
        c->jobs = j->next;
        job_free(j);
    }
    kb_txns_free(c->txns);
    free(c);
    b->txn_coord = NULL;
}
