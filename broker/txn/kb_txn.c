#include "kb_txn.h"

#include <stdlib.h>
#include <string.h>

#include "kb_log.h"
#include "kb_map.h"

struct kb_txns {
    kb_txn_env env;
    kb_map by_id; /* kb_txn *, by transactional id */
};

static const char *const state_names[] = {
    "Empty",         "Ongoing",        "PrepareCommit", "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "Dead",          "PrepareEpochFence",
};

const char *kb_txn_state_name(kb_txn_state s)
{
    return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "Unknown";
}

/* ---- the registry ------------------------------------------------------- */

static bool txn_is(const void *entry, const void *key)
{
    return kp_str_eq_c(*(const kp_str *)key, ((const kb_txn *)entry)->id);
}

kb_txns *kb_txns_new(const kb_txn_env *env)
{
    kb_txns *ts = calloc(1, sizeof(*ts));
    if (ts == NULL)
        return NULL;
    ts->env = *env;
    return ts;
}

static void parts_free(kb_txn_tp *parts, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        free((char *)(uintptr_t)parts[i].topic);
    free(parts);
}

static void txn_free(kb_txn *t)
{
    parts_free(t->parts, t->nparts);
    free(t->id);
    free(t);
}

void kb_txns_free(kb_txns *ts)
{
    if (ts == NULL)
        return;
    size_t cursor = 0;
    for (kb_txn *t; (t = kb_map_next(&ts->by_id, &cursor)) != NULL;)
        txn_free(t);
    kb_map_fini(&ts->by_id);
    free(ts);
}

kb_txn *kb_txns_find(const kb_txns *ts, kp_str id)
{
    return id.len > 0 ? kb_map_find(&ts->by_id, kb_map_hash_str(id), &id, txn_is) : NULL;
}

kb_txn *kb_txns_find_pid(const kb_txns *ts, int64_t pid)
{
    size_t cur = 0;
    for (kb_txn *t; (t = kb_txns_next(ts, &cur)) != NULL;)
        if (t->m.producer_id == pid)
            return t;
    return NULL;
}

size_t kb_txns_count(const kb_txns *ts)
{
    return kb_map_count(&ts->by_id);
}

kb_txn *kb_txns_next(const kb_txns *ts, size_t *cursor)
{
    return kb_map_next(&ts->by_id, cursor);
}

/* A new transactional id in state Empty with no epoch yet. */
static kp_err insert(kb_txns *ts, kp_str id, const kb_txn_meta *m, kb_txn **out)
{
    if (kb_map_count(&ts->by_id) >= KB_TXN_MAX_IDS)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    kb_txn *t = calloc(1, sizeof(*t));
    if (t == NULL || (t->id = malloc((size_t)id.len + 1)) == NULL) {
        free(t);
        return KP_ERR__NOMEM;
    }
    memcpy(t->id, id.p, (size_t)id.len);
    t->id[id.len] = '\0';
    t->m = *m;
    if (kb_map_insert(&ts->by_id, kb_map_hash_str(id), t) != KP_ERR_NONE) {
        txn_free(t);
        return KP_ERR__NOMEM;
    }
    *out = t;
    return KP_ERR_NONE;
}

static void remove_txn(kb_txns *ts, kb_txn *t)
{
    if (kb_map_remove_entry(&ts->by_id, kb_map_hash_str(kp_str_from(t->id)), t))
        txn_free(t);
}

void kb_txns_remove(kb_txns *ts, kb_txn *t)
{
    remove_txn(ts, t);
}

/* ---- partitions --------------------------------------------------------- */

static int tp_cmp(const void *a, const void *b)
{
    const kb_txn_tp *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c != 0 ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

bool kb_txn_has_partition(const kb_txn *t, const char *topic, int32_t partition)
{
    kb_txn_tp key = {topic, partition};
    return t->nparts > 0 &&
           bsearch(&key, t->parts, (size_t)t->nparts, sizeof(key), tp_cmp) != NULL;
}

/* t's partitions plus tps, sorted and unique, topics copied; *out is NULL
 * when nothing is new. */
static kp_err parts_union(const kb_txn *t, const kb_txn_tp *tps, int32_t n, kb_txn_tp **out,
                          int32_t *nout)
{
    *out = NULL;
    kb_txn_tp *v = calloc((size_t)t->nparts + (size_t)n + 1, sizeof(*v));
    if (v == NULL)
        return KP_ERR__NOMEM;
    int32_t k = 0;
    for (int32_t i = 0; i < t->nparts; i++)
        v[k++] = (kb_txn_tp){strdup(t->parts[i].topic), t->parts[i].partition};
    for (int32_t i = 0; i < n; i++)
        if (!kb_txn_has_partition(t, tps[i].topic, tps[i].partition))
            v[k++] = (kb_txn_tp){strdup(tps[i].topic), tps[i].partition};
    for (int32_t i = 0; i < k; i++) {
        if (v[i].topic == NULL) {
            parts_free(v, k);
            return KP_ERR__NOMEM;
        }
    }
    qsort(v, (size_t)k, sizeof(*v), tp_cmp);
    int32_t u = 0; /* drop duplicates within tps */
    for (int32_t i = 0; i < k; i++) {
        if (u > 0 && tp_cmp(&v[u - 1], &v[i]) == 0)
            free((char *)(uintptr_t)v[i].topic);
        else
            v[u++] = v[i];
    }
    if (u > KB_TXN_MAX_PARTITIONS) {
        parts_free(v, u);
        return KP_ERR_INVALID_REQUEST;
    }
    *out = v;
    *nout = u;
    return KP_ERR_NONE;
}

/* ---- transitions -------------------------------------------------------- */

static int64_t now_ms(const kb_txns *ts)
{
    return ts->env.wall_ms(ts->env.ctx);
}

/* Kafka's transaction transitions: the states each state may follow
 * (aborting from Empty or Complete* is transaction protocol v2's). */
static bool transition_allowed(kb_txn_state from, kb_txn_state to)
{
    bool idle = from == KB_TXN_EMPTY || from == KB_TXN_COMPLETE_COMMIT ||
                from == KB_TXN_COMPLETE_ABORT;
    switch (to) {
    case KB_TXN_EMPTY:
    case KB_TXN_DEAD:
        return idle;
    case KB_TXN_ONGOING:
        return idle || from == KB_TXN_ONGOING;
    case KB_TXN_PREPARE_COMMIT:
    case KB_TXN_PREPARE_EPOCH_FENCE:
        return from == KB_TXN_ONGOING;
    case KB_TXN_PREPARE_ABORT:
        return idle || from == KB_TXN_ONGOING || from == KB_TXN_PREPARE_EPOCH_FENCE;
    case KB_TXN_COMPLETE_COMMIT:
        return from == KB_TXN_PREPARE_COMMIT;
    case KB_TXN_COMPLETE_ABORT:
        return from == KB_TXN_PREPARE_ABORT;
    }
    return false;
}

/* Writes next (with t's partitions, or none) and then applies it: the one
 * way a transaction changes state (invariants 1 and 4 of kb_txn.h). */
static kp_err transit(kb_txns *ts, kb_txn *t, const kb_txn_meta *next, bool keep_parts)
{
    KB_DCHECK(transition_allowed(t->m.state, next->state));
    KB_DCHECK(next->state != KB_TXN_ONGOING || next->start_ms >= 0);
    kp_err e = ts->env.persist(ts->env.ctx, t->id, next, keep_parts ? t->parts : NULL,
                               keep_parts ? t->nparts : 0);
    if (e != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    t->m = *next;
    if (!keep_parts) {
        parts_free(t->parts, t->nparts);
        t->parts = NULL;
        t->nparts = 0;
    }
    return KP_ERR_NONE;
}

/* The meta Complete* gets from t's Prepare*: a TV2 end that exhausted the
 * epoch hands over its next producer id at epoch 0 (Kafka's prepareComplete). */
static kb_txn_meta completed_meta(const kb_txns *ts, const kb_txn *t, bool commit)
{
    kb_txn_meta next = t->m;
    next.state = commit ? KB_TXN_COMPLETE_COMMIT : KB_TXN_COMPLETE_ABORT;
    next.update_ms = now_ms(ts);
    if (t->m.client_tv >= KB_TXN_TV2)
        next.last_producer_epoch = t->m.producer_epoch;
    if (t->m.next_producer_id >= 0) {
        next.last_producer_id = t->m.producer_id;
        next.producer_id = t->m.next_producer_id;
        next.producer_epoch = 0;
        next.next_producer_id = -1;
    }
    return next;
}

/* From Prepare*: markers, then Complete*. Failures leave Prepare* (retried). */
static kp_err complete(kb_txns *ts, kb_txn *t)
{
    bool commit = t->m.state == KB_TXN_PREPARE_COMMIT;
    kp_err e = ts->env.markers(ts->env.ctx, t, commit);
    if (e != KP_ERR_NONE)
        return e;
    kb_txn_meta next = completed_meta(ts, t, commit);
    return transit(ts, t, &next, false);
}

/* Writes next (a Prepare*), then completes it. */
static kp_err prepare_and_complete(kb_txns *ts, kb_txn *t, const kb_txn_meta *next)
{
    kp_err e = transit(ts, t, next, true);
    if (e != KP_ERR_NONE)
        return e;
    (void)complete(ts, t); /* the client is answered once Prepare* is written */
    return KP_ERR_NONE;
}

/* A TV2 end bumps the epoch; from an exhausted one it reserves the producer
 * id Complete* hands over (the markers still carry the old id). */
static kp_err end_bump(kb_txns *ts, const kb_txn *t, kb_txn_meta *next)
{
    int16_t cur = t->m.producer_epoch;
    next->producer_epoch = cur < INT16_MAX ? (int16_t)(cur + 1) : cur;
    next->last_producer_epoch = cur;
    next->next_producer_id = -1;
    if (cur >= INT16_MAX - 1 && ts->env.new_pid(ts->env.ctx, &next->next_producer_id) != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return KP_ERR_NONE;
}

/* Ongoing (or, for a TV2 abort, an idle transaction with nothing added) to
 * Prepare*, then completion. */
static kp_err prepare_end(kb_txns *ts, kb_txn *t, bool commit, int16_t tv)
{
    kb_txn_meta next = t->m;
    next.state = commit ? KB_TXN_PREPARE_COMMIT : KB_TXN_PREPARE_ABORT;
    next.update_ms = now_ms(ts);
    next.client_tv = tv;
    if (t->m.state != KB_TXN_ONGOING)
        next.start_ms = next.update_ms;
    kp_err e = tv >= KB_TXN_TV2 ? end_bump(ts, t, &next) : KP_ERR_NONE;
    return e != KP_ERR_NONE ? e : prepare_and_complete(ts, t, &next);
}

/* Kafka's epoch fence: the open transaction is aborted at epoch + 1, so
 * the producer that opened it can no longer write or end it; a TV2
 * transaction's abort bumps once more, as every TV2 end does. */
static kp_err fence_and_abort(kb_txns *ts, kb_txn *t)
{
    int16_t bumps = t->m.client_tv >= KB_TXN_TV2 ? 2 : 1;
    kb_txn_meta next = t->m;
    next.state = KB_TXN_PREPARE_ABORT;
    next.update_ms = now_ms(ts);
    next.producer_epoch = t->m.producer_epoch <= INT16_MAX - bumps
                              ? (int16_t)(t->m.producer_epoch + bumps)
                              : t->m.producer_epoch;
    next.last_producer_epoch = -1;
    return prepare_and_complete(ts, t, &next);
}

/* Is epoch the one an EndTxn must carry? Under TV2 an ended transaction
 * also takes the epoch one below its bumped one (a retry). */
static bool end_epoch_valid(const kb_txn *t, int16_t epoch, bool retry)
{
    if (t->m.client_tv < KB_TXN_TV2)
        return epoch == t->m.producer_epoch;
    switch (t->m.state) {
    case KB_TXN_PREPARE_COMMIT:
    case KB_TXN_PREPARE_ABORT:
        return retry;
    case KB_TXN_COMPLETE_COMMIT:
    case KB_TXN_COMPLETE_ABORT:
        return retry || epoch == t->m.producer_epoch;
    default:
        return epoch == t->m.producer_epoch;
    }
}

/* EndTxn with no transaction open: the same result again is a retry; a
 * TV2 abort (the client may not know whether a Produce added partitions)
 * ends an empty transaction with an epoch bump. */
static kp_err end_idle(kb_txns *ts, kb_txn *t, bool commit, int16_t tv, bool retry)
{
    bool same = t->m.state != KB_TXN_EMPTY && commit == (t->m.state == KB_TXN_COMPLETE_COMMIT);
    if (same && (retry || t->m.client_tv < KB_TXN_TV2))
        return KP_ERR_NONE;
    if (!commit && !retry && tv >= KB_TXN_TV2)
        return prepare_end(ts, t, false, tv);
    return KP_ERR_INVALID_TXN_STATE;
}

static kp_err end_in_state(kb_txns *ts, kb_txn *t, bool commit, int16_t tv, bool retry)
{
    switch (t->m.state) {
    case KB_TXN_ONGOING:
        return prepare_end(ts, t, commit, tv);
    case KB_TXN_EMPTY:
    case KB_TXN_COMPLETE_COMMIT:
    case KB_TXN_COMPLETE_ABORT:
        return end_idle(ts, t, commit, tv, retry);
    case KB_TXN_PREPARE_COMMIT:
        return commit ? KP_ERR_CONCURRENT_TRANSACTIONS : KP_ERR_INVALID_TXN_STATE;
    case KB_TXN_PREPARE_ABORT:
        return commit ? KP_ERR_INVALID_TXN_STATE : KP_ERR_CONCURRENT_TRANSACTIONS;
    default:
        return KP_ERR_INVALID_TXN_STATE;
    }
}

kp_err kb_txn_end_tv(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch, bool commit, int16_t tv,
                     int64_t *out_pid, int16_t *out_epoch)
{
    *out_pid = -1;
    *out_epoch = -1;
    if (id.len <= 0)
        return KP_ERR_INVALID_REQUEST;
    kb_txn *t = kb_txns_find(ts, id);
    if (t == NULL)
        return KP_ERR_INVALID_PRODUCER_ID_MAPPING;
    bool v2 = t->m.client_tv >= KB_TXN_TV2;
    bool retry_overflow = v2 && t->m.last_producer_id == pid && epoch == INT16_MAX - 1 &&
                          t->m.producer_epoch == 0;
    bool retry = retry_overflow || (v2 && t->m.producer_epoch == epoch + 1);
    if (t->m.producer_id != pid && !retry_overflow)
        return KP_ERR_INVALID_PRODUCER_ID_MAPPING;
    if (!end_epoch_valid(t, epoch, retry))
        return KP_ERR_PRODUCER_FENCED;
    kp_err e = end_in_state(ts, t, commit, tv, retry);
    if (e == KP_ERR_NONE) {
        bool handover = t->m.next_producer_id >= 0; /* markers still to write */
        *out_pid = handover ? t->m.next_producer_id : t->m.producer_id;
        *out_epoch = handover ? 0 : t->m.producer_epoch;
    }
    return e;
}

kp_err kb_txn_end(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch, bool commit)
{
    int64_t out_pid;
    int16_t out_epoch;
    return kb_txn_end_tv(ts, id, pid, epoch, commit, KB_TXN_TV1, &out_pid, &out_epoch);
}

kp_err kb_txn_check_producer(const kb_txn *t, int64_t pid, int16_t epoch)
{
    if (t == NULL || t->m.producer_id != pid)
        return KP_ERR_INVALID_PRODUCER_ID_MAPPING;
    if (t->m.producer_epoch != epoch)
        return KP_ERR_PRODUCER_FENCED;
    if (t->m.state == KB_TXN_PREPARE_COMMIT || t->m.state == KB_TXN_PREPARE_ABORT)
        return KP_ERR_CONCURRENT_TRANSACTIONS;
    return KP_ERR_NONE;
}

kp_err kb_txn_add_partitions(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch,
                             const kb_txn_tp *tps, int32_t n)
{
    return kb_txn_add_partitions_tv(ts, id, pid, epoch, tps, n, KB_TXN_TV1);
}

kp_err kb_txn_add_partitions_tv(kb_txns *ts, kp_str id, int64_t pid, int16_t epoch,
                                const kb_txn_tp *tps, int32_t n, int16_t tv)
{
    if (id.len <= 0)
        return KP_ERR_INVALID_REQUEST;
    kb_txn *t = kb_txns_find(ts, id);
    kp_err e = kb_txn_check_producer(t, pid, epoch);
    if (e != KP_ERR_NONE)
        return e;
    kb_txn_tp *v;
    int32_t nv = 0;
    if ((e = parts_union(t, tps, n, &v, &nv)) != KP_ERR_NONE)
        return e;
    if (t->m.state == KB_TXN_ONGOING && nv == t->nparts && t->m.client_tv == tv) {
        parts_free(v, nv); /* nothing new: Kafka answers at once */
        return KP_ERR_NONE;
    }
    kb_txn_meta next = t->m;
    next.update_ms = now_ms(ts);
    if (t->m.state != KB_TXN_ONGOING)
        next.start_ms = next.update_ms;
    next.state = KB_TXN_ONGOING;
    next.client_tv = tv;
    if (ts->env.persist(ts->env.ctx, t->id, &next, v, nv) != KP_ERR_NONE) {
        parts_free(v, nv);
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    }
    parts_free(t->parts, t->nparts);
    t->parts = v;
    t->nparts = nv;
    t->m = next;
    return KP_ERR_NONE;
}

/* ---- InitProducerId ----------------------------------------------------- */

static bool epoch_exhausted(int16_t epoch)
{
    return epoch >= INT16_MAX - 1;
}

/* Kafka's isValidProducerId (KIP-360): may this producer re-initialise? */
static bool valid_producer(const kb_txn *t, int64_t pid, int16_t epoch)
{
    return t->m.producer_epoch == -1 || pid == t->m.producer_id ||
           (pid == t->m.last_producer_id && epoch_exhausted(epoch));
}

/* The epoch (and last epoch) an InitProducerId from Empty/Complete* gives. */
static kp_err bump_epoch(const kb_txn *t, bool expected, int16_t want, kb_txn_meta *next)
{
    int16_t cur = t->m.producer_epoch;
    if (!expected) {
        next->producer_epoch = (int16_t)(cur + 1);
        next->last_producer_epoch = -1;
    } else if (cur == -1 || want == cur) {
        next->producer_epoch = (int16_t)(cur + 1);
        next->last_producer_epoch = cur;
    } else if (want == t->m.last_producer_epoch) {
        next->producer_epoch = cur; /* a retry of a bump that succeeded */
    } else {
        return KP_ERR_PRODUCER_FENCED;
    }
    return KP_ERR_NONE;
}

static kp_err init_from_idle(kb_txns *ts, kb_txn *t, int32_t timeout_ms, bool expected,
                             int16_t want)
{
    kb_txn_meta next = t->m;
    kp_err e;
    if (epoch_exhausted(t->m.producer_epoch) && (!expected || want == t->m.producer_epoch)) {
        int64_t pid;
        if ((e = ts->env.new_pid(ts->env.ctx, &pid)) != KP_ERR_NONE)
            return KP_ERR_COORDINATOR_NOT_AVAILABLE;
        next.last_producer_id = t->m.producer_id;
        next.producer_id = pid;
        next.producer_epoch = 0;
        next.last_producer_epoch = expected ? t->m.producer_epoch : -1;
    } else if ((e = bump_epoch(t, expected, want, &next)) != KP_ERR_NONE) {
        return e;
    }
    next.state = KB_TXN_EMPTY;
    next.timeout_ms = timeout_ms;
    next.start_ms = -1;
    next.update_ms = now_ms(ts);
    return transit(ts, t, &next, false);
}

static kp_err find_or_create(kb_txns *ts, kp_str id, int32_t timeout_ms, kb_txn **out)
{
    *out = kb_txns_find(ts, id);
    if (*out != NULL)
        return KP_ERR_NONE;
    kb_txn_meta m = {.last_producer_id = -1,
                     .next_producer_id = -1,
                     .producer_epoch = -1,
                     .last_producer_epoch = -1,
                     .timeout_ms = timeout_ms,
                     .state = KB_TXN_EMPTY,
                     .start_ms = -1,
                     .update_ms = now_ms(ts)};
    if (kb_map_count(&ts->by_id) >= KB_TXN_MAX_IDS)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    if (ts->env.new_pid(ts->env.ctx, &m.producer_id) != KP_ERR_NONE)
        return KP_ERR_COORDINATOR_NOT_AVAILABLE;
    return insert(ts, id, &m, out);
}

kp_err kb_txn_init_producer(kb_txns *ts, kp_str id, int32_t timeout_ms, int64_t pid,
                            int16_t epoch, int64_t *out_pid, int16_t *out_epoch)
{
    *out_pid = -1;
    *out_epoch = -1;
    if (id.len == 0 || (pid == -1) != (epoch == -1))
        return KP_ERR_INVALID_REQUEST;
    if (timeout_ms <= 0 || timeout_ms > ts->env.max_timeout_ms)
        return KP_ERR_INVALID_TRANSACTION_TIMEOUT;
    kb_txn *t;
    kp_err e = find_or_create(ts, id, timeout_ms, &t);
    if (e != KP_ERR_NONE)
        return e;
    bool expected = pid != -1;
    if (expected && !valid_producer(t, pid, epoch))
        return KP_ERR_PRODUCER_FENCED;
    switch (t->m.state) {
    case KB_TXN_PREPARE_COMMIT:
    case KB_TXN_PREPARE_ABORT:
        (void)complete(ts, t); /* retry markers a failed write left behind */
        return KP_ERR_CONCURRENT_TRANSACTIONS;
    case KB_TXN_ONGOING:
        /* Abort the open transaction at a fenced epoch; the retry bumps again. */
        e = fence_and_abort(ts, t);
        return e != KP_ERR_NONE ? e : KP_ERR_CONCURRENT_TRANSACTIONS;
    case KB_TXN_EMPTY:
    case KB_TXN_COMPLETE_COMMIT:
    case KB_TXN_COMPLETE_ABORT:
        if ((e = init_from_idle(ts, t, timeout_ms, expected, epoch)) != KP_ERR_NONE)
            return e;
        *out_pid = t->m.producer_id;
        *out_epoch = t->m.producer_epoch;
        return KP_ERR_NONE;
    default:
        return KP_ERR_UNKNOWN_SERVER_ERROR;
    }
}

/* ---- timers ------------------------------------------------------------- */

static bool idle_expired(const kb_txns *ts, const kb_txn *t, int64_t now)
{
    bool idle = t->m.state == KB_TXN_EMPTY || t->m.state == KB_TXN_COMPLETE_COMMIT ||
                t->m.state == KB_TXN_COMPLETE_ABORT;
    return idle && ts->env.id_expiration_ms > 0 && now - t->m.update_ms >= ts->env.id_expiration_ms;
}

/* One transaction's periodic work; true if it was removed. */
static bool tick_one(kb_txns *ts, kb_txn *t, int64_t now, int32_t *aborted)
{
    if (t->m.state == KB_TXN_ONGOING && t->m.start_ms + t->m.timeout_ms < now) {
        if (fence_and_abort(ts, t) == KP_ERR_NONE)
            (*aborted)++;
    } else if (t->m.state == KB_TXN_PREPARE_COMMIT || t->m.state == KB_TXN_PREPARE_ABORT) {
        (void)complete(ts, t);
    } else if (idle_expired(ts, t, now) && ts->env.tombstone(ts->env.ctx, t->id) == KP_ERR_NONE) {
        remove_txn(ts, t);
        return true;
    }
    return false;
}

int32_t kb_txns_tick(kb_txns *ts)
{
    int64_t now = now_ms(ts);
    int32_t aborted = 0;
    size_t cursor = 0; /* tick_one may remove t: kb_map_next allows that */
    for (kb_txn *t; (t = kb_map_next(&ts->by_id, &cursor)) != NULL;)
        (void)tick_one(ts, t, now, &aborted);
    return aborted;
}

/* ---- loading ------------------------------------------------------------ */

/* The partitions of a record value, sorted and unique, topics copied. */
static kp_err parts_from_value(const kp_transaction_log_value *v, kp_arena *a, kb_txn_tp **out,
                               int32_t *n)
{
    int32_t total = 0;
    for (int32_t i = 0; i < v->transaction_partitions.n; i++)
        total += v->transaction_partitions.v[i].partition_ids.n;
    *out = NULL;
    *n = 0;
    if (total <= 0)
        return KP_ERR_NONE;
    kb_txn_tp *tps = kp_arena_calloc(a, (size_t)total, sizeof(*tps));
    if (tps == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0, k = 0; i < v->transaction_partitions.n; i++) {
        const kp_transaction_log_value_partitions_schema *ps = &v->transaction_partitions.v[i];
        char *topic = kp_arena_strdup(a, ps->topic.len > 0 ? ps->topic.p : "",
                                      (size_t)(ps->topic.len > 0 ? ps->topic.len : 0));
        if (topic == NULL)
            return KP_ERR__NOMEM;
        for (int32_t j = 0; j < ps->partition_ids.n; j++)
            tps[k++] = (kb_txn_tp){topic, ps->partition_ids.v[j]};
    }
    kb_txn none = {0};
    return parts_union(&none, tps, total, out, n);
}

kp_err kb_txns_load(kb_txns *ts, kp_str id, const kp_transaction_log_value *v, kp_arena *a)
{
    kb_txn *t = kb_txns_find(ts, id);
    if (v == NULL) {
        if (t != NULL)
            remove_txn(ts, t);
        return KP_ERR_NONE;
    }
    kb_txn_meta m = {.producer_id = v->producer_id,
                     .last_producer_id = v->previous_producer_id,
                     .next_producer_id = v->next_producer_id,
                     .producer_epoch = v->producer_epoch,
                     .last_producer_epoch = -1,
                     .timeout_ms = v->transaction_timeout_ms,
                     .state = (kb_txn_state)v->transaction_status,
                     .start_ms = v->transaction_start_timestamp_ms,
                     .update_ms = v->transaction_last_update_timestamp_ms,
                     .client_tv = v->client_transaction_version};
    if (v->transaction_status < 0 || v->transaction_status > KB_TXN_PREPARE_EPOCH_FENCE)
        return KP_ERR__CORRUPT;
    kb_txn_tp *parts;
    int32_t n;
    kp_err e = parts_from_value(v, a, &parts, &n);
    if (e == KP_ERR_NONE && t == NULL)
        e = insert(ts, id, &m, &t);
    if (e != KP_ERR_NONE) {
        parts_free(parts, n);
        return e;
    }
    t->m = m;
    parts_free(t->parts, t->nparts);
    t->parts = parts;
    t->nparts = n;
    return KP_ERR_NONE;
}

void kb_txns_load_done(kb_txns *ts)
{
    size_t cur = 0;
    for (kb_txn *t; (t = kb_txns_next(ts, &cur)) != NULL;) {
        if (t->m.state == KB_TXN_PREPARE_COMMIT || t->m.state == KB_TXN_PREPARE_ABORT)
            (void)complete(ts, t);
        else if (t->m.state == KB_TXN_PREPARE_EPOCH_FENCE || t->m.state == KB_TXN_DEAD)
            t->m.state = KB_TXN_COMPLETE_ABORT; /* never written by Runnel; treat as ended */
    }
}

/* ---- record bytes ------------------------------------------------------- */

void kb_txn_write_key(kp_writer *w, const char *id)
{
    kp_transaction_log_key k = {.transactional_id = kp_str_from(id)};
    kp_write_i16(w, KB_TXN_KEY_VERSION);
    kp_transaction_log_key_encode(w, &k, KB_TXN_KEY_VERSION);
}

/* Groups the sorted partitions by topic (Kafka's PartitionsSchema list). */
static void value_partitions(const kb_txn_tp *parts, int32_t n, kp_arena *a,
                             kp_transaction_log_value *v)
{
    kp_transaction_log_value_partitions_schema *ps =
        kp_arena_calloc(a, (size_t)n + 1, sizeof(*ps));
    int32_t *ids = kp_arena_calloc(a, (size_t)n + 1, sizeof(*ids));
    int32_t nt = 0;
    if (ps == NULL || ids == NULL)
        return;
    for (int32_t i = 0; i < n; i++) {
        if (nt == 0 || strcmp(parts[i].topic, parts[i - 1].topic) != 0) {
            ps[nt].topic = kp_str_from(parts[i].topic);
            ps[nt].partition_ids.v = &ids[i];
            nt++;
        }
        ids[i] = parts[i].partition;
        ps[nt - 1].partition_ids.n++;
    }
    v->transaction_partitions.n = nt;
    v->transaction_partitions.v = ps;
}

void kb_txn_write_value(kp_writer *w, const kb_txn_meta *m, const kb_txn_tp *parts, int32_t n,
                        kp_arena *a)
{
    kp_transaction_log_value v;
    kp_transaction_log_value_defaults(&v);
    v.producer_id = m->producer_id;
    v.previous_producer_id = m->last_producer_id;
    v.next_producer_id = m->next_producer_id;
    v.client_transaction_version = m->client_tv;
    v.producer_epoch = m->producer_epoch;
    v.transaction_timeout_ms = m->timeout_ms;
    v.transaction_status = (int8_t)m->state;
    v.transaction_partitions.n = m->state == KB_TXN_EMPTY ? -1 : 0; /* Empty writes null */
    if (n > 0)
        value_partitions(parts, n, a, &v);
    v.transaction_last_update_timestamp_ms = m->update_ms;
    v.transaction_start_timestamp_ms = m->start_ms;
    kp_write_i16(w, KB_TXN_VALUE_VERSION);
    kp_transaction_log_value_encode(w, &v, KB_TXN_VALUE_VERSION);
}

kp_err kb_txn_read_key(kp_slice key, kp_arena *a, kp_str *id)
{
    if (key.len < 2)
        return KP_ERR__CORRUPT;
    kp_reader r = kp_reader_make(key.p, (size_t)key.len);
    int16_t version = kp_read_i16(&r);
    kp_transaction_log_key k;
    if (version != KB_TXN_KEY_VERSION || kp_transaction_log_key_decode(&r, a, &k, version) !=
                                             KP_ERR_NONE || k.transactional_id.len <= 0)
        return KP_ERR__CORRUPT;
    *id = k.transactional_id;
    return KP_ERR_NONE;
}

kp_err kb_txn_read_value(kp_slice value, kp_arena *a, kp_transaction_log_value *out)
{
    if (value.len < 2)
        return KP_ERR__CORRUPT;
    kp_reader r = kp_reader_make(value.p, (size_t)value.len);
    int16_t version = kp_read_i16(&r);
    kp_transaction_log_value_defaults(out);
    if (version < 0 || version > 1 ||
        kp_transaction_log_value_decode(&r, a, out, version) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    if (out->transaction_partitions.n < 0)
        out->transaction_partitions.n = 0;
    return KP_ERR_NONE;
}
