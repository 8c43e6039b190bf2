#include "kb_lag_status.h"

#include <stdbool.h>
#include <stdlib.h>

kp_err kb_lag_window_init(kb_lag_window *w, int32_t size)
{
    size = size < 1 ? 1 : size > KB_LAG_WINDOW_MAX ? KB_LAG_WINDOW_MAX : size;
    w->c = calloc((size_t)size, sizeof(*w->c));
    w->size = w->c != NULL ? size : 0;
    w->n = w->head = 0;
    return w->c != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
}

void kb_lag_window_fini(kb_lag_window *w)
{
    free(w->c);
    w->c = NULL;
    w->size = w->n = w->head = 0;
}

/* The i-th entry, oldest first. */
static const kb_lag_commit *at(const kb_lag_window *w, int32_t i)
{
    return &w->c[(w->head + i) % w->size];
}

const kb_lag_commit *kb_lag_window_last(const kb_lag_window *w)
{
    return w->n > 0 ? at(w, w->n - 1) : NULL;
}

void kb_lag_window_add(kb_lag_window *w, int64_t at_ms, int64_t offset, int64_t log_end)
{
    const kb_lag_commit *last = kb_lag_window_last(w);
    if (w->size == 0)
        return;
    if (last != NULL && offset < last->offset)
        w->n = w->head = 0; /* invariant 2: an offset reset starts a new window */
    kb_lag_commit c = {at_ms, offset, log_end > offset ? log_end - offset : 0};
    if (w->n == w->size) {
        w->c[w->head] = c;
        w->head = (w->head + 1) % w->size;
    } else {
        w->c[(w->head + w->n) % w->size] = c;
        w->n++;
    }
}

static bool stopped(const kb_lag_window *w, int64_t now, int64_t min_stop_ms)
{
    const kb_lag_commit *last = kb_lag_window_last(w);
    if (last == NULL)
        return false;
    int64_t span = last->at_ms - at(w, 0)->at_ms;
    return now - last->at_ms > (span > min_stop_ms ? span : min_stop_ms);
}

static bool saw_zero_lag(const kb_lag_window *w)
{
    for (int32_t i = 0; i < w->n; i++)
        if (at(w, i)->lag == 0)
            return true;
    return false;
}

static bool lag_never_fell(const kb_lag_window *w)
{
    for (int32_t i = 1; i < w->n; i++)
        if (at(w, i)->lag < at(w, i - 1)->lag)
            return false;
    return at(w, w->n - 1)->lag > at(w, 0)->lag;
}

kb_lag_status kb_lag_evaluate(const kb_lag_window *w, int64_t now, int64_t lag_now,
                              int64_t min_stop_ms)
{
    if (lag_now <= 0 || w->n == 0)
        return KB_LAG_OK;
    if (stopped(w, now, min_stop_ms))
        return KB_LAG_STOPPED;
    if (w->n < w->size || saw_zero_lag(w))
        return KB_LAG_OK;
    if (at(w, 0)->offset == at(w, w->n - 1)->offset)
        return KB_LAG_STALL;
    return lag_never_fell(w) ? KB_LAG_WARNING : KB_LAG_OK;
}

const char *kb_lag_status_name(kb_lag_status s)
{
    static const char *const names[] = {"OK", "WARNING", "STALL", "STOPPED"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

kb_lag_group_status kb_lag_group_fold(kb_lag_group_status acc, kb_lag_status s)
{
    kb_lag_group_status mine = s == KB_LAG_STOPPED || s == KB_LAG_STALL ? KB_LAG_GROUP_ERROR
                               : s == KB_LAG_WARNING                    ? KB_LAG_GROUP_WARNING
                                                                        : KB_LAG_GROUP_OK;
    return mine > acc ? mine : acc;
}

const char *kb_lag_group_status_name(kb_lag_group_status s)
{
    static const char *const names[] = {"OK", "WARNING", "ERROR"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}
