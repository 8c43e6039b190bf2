#include "kb_console_lag.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kb_group_coord.h"
#include "kb_lag.h"
#include "kb_partition_log.h"

static bool series_match(const void *entry, const void *key)
{
    const kb_lag_series *s = entry;
    return strcmp(s->group, key) == 0;
}

static uint64_t group_hash(const char *id)
{
    return kb_map_hash_str(kp_str_from(id));
}

int64_t kb_console_lag_total(kb_broker *b, const kb_group *g)
{
    kb_lag_group_row row;
    kb_lag_group_of(b, g, &row);
    return row.lag;
}

static kb_lag_series *series_get(kb_console_lag *lag, const char *id)
{
    uint64_t h = group_hash(id);
    kb_lag_series *s = kb_map_find(&lag->series, h, id, series_match);
    if (s != NULL || kb_map_count(&lag->series) >= KB_LAG_GROUPS)
        return s;
    s = calloc(1, sizeof(*s));
    if (s == NULL || (s->group = strdup(id)) == NULL || kb_map_insert(&lag->series, h, s) != KP_ERR_NONE) {
        if (s != NULL)
            free(s->group);
        free(s);
        return NULL;
    }
    return s;
}

int64_t kb_console_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const kb_lag_point *kb_console_lag_point(const kb_lag_series *s, int32_t i)
{
    return &s->pts[(s->head + i) % KB_LAG_POINTS];
}

static void series_add(kb_lag_series *s, int64_t now, int64_t value)
{
    if (s->n > 0 && kb_console_lag_point(s, s->n - 1)->ts_ms >= now)
        return;
    if (s->n == KB_LAG_POINTS) {
        s->head = (s->head + 1) % KB_LAG_POINTS;
        s->n--;
    }
    kb_lag_point *p = &s->pts[(s->head + s->n) % KB_LAG_POINTS];
    p->ts_ms = now;
    p->lag = value;
    s->n++;
}

static void sample_group(kb_console_lag *lag, const kb_group *g, int64_t now)
{
    if (kb_offset_map_count(&g->offsets) == 0)
        return;
    kb_lag_series *s = series_get(lag, g->id);
    if (s == NULL)
        return;
    s->seen = lag->sweep;
    series_add(s, now, kb_console_lag_total(lag->b, g));
}

static void drop_unseen(kb_console_lag *lag)
{
    size_t cur = 0;
    kb_lag_series *s;
    while ((s = kb_map_next(&lag->series, &cur)) != NULL) {
        if (s->seen == lag->sweep)
            continue;
        kb_map_remove_entry(&lag->series, group_hash(s->group), s);
        free(s->group);
        free(s);
    }
}

static void on_sample(kb_loop *loop, void *arg)
{
    kb_console_lag *lag = arg;
    kb_groups *gs = kb_group_coord_groups(lag->b);
    int64_t now = kb_console_wall_ms();
    lag->sweep++;
    size_t cur = 0;
    kb_group *g;
    while (gs != NULL && (g = kb_groups_next(gs, &cur)) != NULL)
        sample_group(lag, g, now);
    drop_unseen(lag);
    kb_timer_arm(loop, &lag->timer, KB_LAG_SAMPLE_MS);
}

const kb_lag_series *kb_console_lag_series(kb_console_lag *lag, const kb_group *g)
{
    kb_lag_series *s = series_get(lag, g->id);
    if (s == NULL)
        return NULL;
    int64_t now = kb_console_wall_ms();
    if (s->n == 0 || now - kb_console_lag_point(s, s->n - 1)->ts_ms >= KB_LAG_DEMAND_MS) {
        s->seen = lag->sweep;
        series_add(s, now, kb_console_lag_total(lag->b, g));
    }
    return s;
}

kp_err kb_console_lag_start(kb_broker *b, kb_console_lag *lag)
{
    memset(lag, 0, sizeof(*lag));
    lag->b = b;
    kb_map_init(&lag->series);
    kb_timer_init(&lag->timer, on_sample, lag);
    return kb_timer_arm(b->loop, &lag->timer, KB_LAG_SAMPLE_MS);
}

void kb_console_lag_stop(kb_console_lag *lag)
{
    if (lag->b == NULL)
        return;
    kb_timer_disarm(lag->b->loop, &lag->timer);
    size_t cur = 0;
    kb_lag_series *s;
    while ((s = kb_map_next(&lag->series, &cur)) != NULL) {
        free(s->group);
        free(s);
    }
    kb_map_fini(&lag->series);
    lag->b = NULL;
}
