#include "kb_retention_guard.h"

#include <stdlib.h>
#include <string.h>

#include "kb_log.h"
#include "kb_map.h"
#include "ks_retention.h"

#define HOLD_LOG_INTERVAL_MS 60000

struct kb_retention_guard {
    kb_guard_mode mode;
    int64_t max_ms;
    int64_t max_bytes;
    kb_guard_readers_fn *readers;
    void *readers_arg;
    kb_retention_guard_stats stats;
    kb_log_ratelimit hold_log; /* one hold line per partition a minute */
};

kb_retention_guard *kb_retention_guard_new(const kb_config *cfg)
{
    kb_retention_guard *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    g->mode = cfg->retention_guard;
    g->max_ms = cfg->retention_guard_max_ms;
    g->max_bytes = cfg->retention_guard_max_bytes;
    kb_log_ratelimit_init(&g->hold_log, 1, HOLD_LOG_INTERVAL_MS);
    return g;
}

void kb_retention_guard_free(kb_retention_guard *g)
{
    free(g);
}

void kb_retention_guard_set_readers(kb_retention_guard *g, kb_guard_readers_fn *fn, void *arg)
{
    g->readers = fn;
    g->readers_arg = arg;
}

void kb_retention_guard_stats_get(const kb_retention_guard *g, kb_retention_guard_stats *out)
{
    *out = g->stats;
}

/* ---- the readers' offsets ----------------------------------------------- */

typedef struct lowest_acc {
    int64_t offset; /* INT64_MAX: no reader */
} lowest_acc;

static void take_lowest(void *arg, const char *group, int64_t committed)
{
    (void)group;
    lowest_acc *acc = arg;
    if (committed >= 0 && committed < acc->offset)
        acc->offset = committed;
}

typedef struct loss_report {
    kb_retention_guard *g;
    const ks_log *log;
    int64_t new_start; /* the log start once the segments are gone */
    const char *why;   /* "warn", or "hold bound passed" */
} loss_report;

static void report_loss(void *arg, const char *group, int64_t committed)
{
    loss_report *r = arg;
    int64_t from = ks_log_start_offset(r->log);
    from = committed > from ? committed : from;
    if (committed < 0 || from >= r->new_start)
        return;
    int64_t lost = r->new_start - from;
    char esc[KB_LOG_ESC_SHORT];
    r->g->stats.warnings++;
    r->g->stats.records_lost += (uint64_t)lost;
    KB_LOG(KB_LL_WARN, KB_SUB_STORAGE,
           "msg=\"retention deletes records a group has not read\" group=%s topic=%s "
           "partition=%d committed_offset=%lld log_start_offset=%lld records=%lld guard=\"%s\"",
           kb_log_escape(esc, sizeof esc, group, strlen(group)), ks_log_topic(r->log),
           ks_log_partition(r->log), (long long)committed, (long long)r->new_start,
           (long long)lost, r->why);
}

/* The log start once the n oldest segments are gone (n < segment count). */
static kp_err start_after(ks_log *log, int32_t n, int64_t *out)
{
    ks_segment *seg;
    kp_err e = ks_log_segment_at(log, n, &seg, NULL);
    if (e == KP_ERR_NONE)
        *out = seg->base_offset > ks_log_start_offset(log) ? seg->base_offset
                                                           : ks_log_start_offset(log);
    return e;
}

static void note_hold(kb_retention_guard *g, const ks_log *log, int64_t lowest, int32_t kept)
{
    g->stats.holds++;
    const char *topic = ks_log_topic(log);
    int32_t partition = ks_log_partition(log);
    uint64_t key = kb_map_hash_more(kb_map_hash_str(kp_str_from(topic)), &partition,
                                    sizeof partition);
    if (!kb_log_ratelimit_allow(&g->hold_log, key, kb_log_now_ms(), NULL))
        return;
    KB_LOG(KB_LL_WARN, KB_SUB_STORAGE,
           "msg=\"retention guard holds segments a group has not read\" topic=%s partition=%d "
           "committed_offset=%lld segments=%d", topic, partition, (long long)lowest, kept);
}

int32_t kb_retention_guard_limit(kb_retention_guard *g, ks_log *log, int64_t now_ms, int32_t max)
{
    int32_t count = 0, allowed;
    int64_t new_start;
    if (g == NULL || g->mode == KB_GUARD_OFF || g->readers == NULL)
        return max;
    if (ks_retention_eligible(log, now_ms, max, &count, NULL) != KP_ERR_NONE)
        return 0;
    if (count == 0 || start_after(log, count, &new_start) != KP_ERR_NONE)
        return count;
    lowest_acc acc = {INT64_MAX};
    g->readers(g->readers_arg, ks_log_topic(log), ks_log_partition(log), take_lowest, &acc);
    if (acc.offset >= new_start)
        return count;
    allowed = count;
    if (g->mode == KB_GUARD_HOLD) {
        ks_retention_hold h = {acc.offset, g->max_ms, g->max_bytes};
        if (ks_retention_apply_hold(log, now_ms, count, &h, &allowed, NULL) != KP_ERR_NONE)
            return 0;
        if (allowed < count)
            note_hold(g, log, acc.offset, count - allowed);
    }
    if (allowed > 0 && start_after(log, allowed, &new_start) == KP_ERR_NONE) {
        loss_report r = {g, log, new_start,
                         g->mode == KB_GUARD_HOLD ? "hold bound passed" : "warn"};
        g->readers(g->readers_arg, ks_log_topic(log), ks_log_partition(log), report_loss, &r);
    }
    return allowed;
}
