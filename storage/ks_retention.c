#include "ks_retention.h"

#include <stdlib.h>
#include <string.h>

static int64_t largest_time(const ks_segment *seg)
{
    return seg->max_timestamp >= 0 ? seg->max_timestamp : seg->mtime_ms;
}

kp_err ks_retention_eligible(ks_log *log, int64_t now_ms, int32_t max, int32_t *count,
                             kp_errctx *ctx)
{
    const ks_log_config c = *ks_log_config_of(log);
    int64_t excess = 0;
    int32_t n = ks_log_segment_count(log);
    int32_t i = 0;
    ks_segment *seg = NULL;
    kp_err err = KP_ERR_NONE;
    if (c.retention_bytes >= 0)
        excess = ks_log_size(log) - c.retention_bytes;
    for (; err == KP_ERR_NONE && i < n - 1 && i < max; i++) {
        ks_segment *next = NULL;
        err = ks_log_segment_at(log, i, &seg, ctx);
        if (err == KP_ERR_NONE)
            err = ks_log_segment_at(log, i + 1, &next, ctx);
        if (err != KP_ERR_NONE)
            break;
        bool below_start = next->base_offset <= ks_log_start_offset(log);
        bool too_old = c.retention_ms >= 0 && now_ms - largest_time(seg) > c.retention_ms;
        bool too_big = c.retention_bytes >= 0 && excess - seg->size >= 0;
        if (!below_start && !too_old && !too_big)
            break;
        excess -= seg->size;
    }
    *count = i;
    return err;
}

static bool past_hold_time(const ks_log *log, const ks_segment *seg, int64_t now_ms,
                           const ks_retention_hold *h)
{
    int64_t retention_ms = ks_log_config_of(log)->retention_ms;
    return retention_ms >= 0 && h->max_ms >= 0 &&
           now_ms - largest_time(seg) - retention_ms > h->max_ms;
}

kp_err ks_retention_apply_hold(ks_log *log, int64_t now_ms, int32_t count,
                               const ks_retention_hold *h, int32_t *allowed, kp_errctx *ctx)
{
    int64_t held = 0, read_up_to = h->keep_from;
    ks_segment *seg = NULL, *next = NULL;
    kp_err err = KP_ERR_NONE;
    if (read_up_to < ks_log_start_offset(log))
        read_up_to = ks_log_start_offset(log);
    for (int32_t i = 0; err == KP_ERR_NONE && i < count; i++)
        if ((err = ks_log_segment_at(log, i, &seg, ctx)) == KP_ERR_NONE)
            held += seg->size;
    int32_t i = 0;
    for (; err == KP_ERR_NONE && i < count; i++) {
        err = ks_log_segment_at(log, i, &seg, ctx);
        if (err == KP_ERR_NONE)
            err = ks_log_segment_at(log, i + 1, &next, ctx);
        if (err != KP_ERR_NONE)
            break;
        bool read = next->base_offset <= read_up_to;
        bool too_many_bytes = h->max_bytes >= 0 && held > h->max_bytes;
        if (!read && !too_many_bytes && !past_hold_time(log, seg, now_ms, h))
            break;
        held -= seg->size;
    }
    *allowed = i;
    return err;
}

kp_err ks_retention_plan(ks_log *log, int64_t now_ms, int32_t max, ks_retention_job *job,
                         kp_errctx *ctx)
{
    int32_t count = 0;
    memset(job, 0, sizeof(*job));
    kp_err err = ks_retention_eligible(log, now_ms, max, &count, ctx);
    if (err != KP_ERR_NONE || count == 0)
        return err;
    job->segs = calloc((size_t)count, sizeof(*job->segs));
    if (job->segs == NULL)
        return KP_ERRCTX(ctx, KP_ERR__NOMEM, 0, "retention job");
    job->n = ks_log_detach_oldest(log, count, job->segs);
    for (int32_t i = 0; i < job->n; i++)
        job->bytes += job->segs[i]->size;
    return KP_ERR_NONE;
}

kp_err ks_retention_finish(ks_retention_job *job, kp_errctx *ctx)
{
    kp_err first = KP_ERR_NONE;
    for (int32_t i = 0; i < job->n; i++) {
        kp_err err = ks_segment_remove(job->segs[i], ctx);
        if (first == KP_ERR_NONE)
            first = err;
        ks_segment_unref(job->segs[i]);
    }
    free(job->segs);
    memset(job, 0, sizeof(*job));
    return first;
}
