/* kb_share_lag: see kb_share_lag.h. */
#include "kb_share_lag.h"

#include "kb_group_coord.h"
#include "kb_share_group.h"
#include "kb_share_partition.h"
#include "kb_topics.h"
#include "ks_log.h"

static bool part_row(kb_broker *b, const kb_group *g, const kb_share_part *sp,
                     kb_share_lag_row *out)
{
    const kb_topic *t = kb_topics_find_id(b->topics, &sp->topic);
    if (t == NULL || sp->partition < 0 || sp->partition >= t->npartitions)
        return false;
    ks_log *log = t->state == KB_TOPIC_READY ? t->partitions[sp->partition].log : NULL;
    out->group = g->id;
    out->topic = t->name;
    out->partition = sp->partition;
    out->start = sp->start;
    out->log_end = log != NULL ? ks_log_high_watermark(log) : -1;
    out->lag = log != NULL ? kb_share_part_lag(sp, out->log_end) : -1;
    return true;
}

void kb_share_lag_each_of(kb_broker *b, const kb_group *g, kb_share_lag_fn *fn, void *arg)
{
    if (g->sg == NULL || g->sg->parts == NULL)
        return;
    size_t n = kb_share_parts_count(g->sg->parts);
    for (size_t i = 0; i < n; i++) {
        kb_share_lag_row row;
        if (part_row(b, g, kb_share_parts_at(g->sg->parts, i), &row))
            fn(arg, &row);
    }
}

void kb_share_lag_each(kb_broker *b, kb_share_lag_fn *fn, void *arg)
{
    kb_groups *gs = kb_group_coord_groups(b);
    size_t cur = 0;
    for (kb_group *g; gs != NULL && (g = kb_groups_next(gs, &cur)) != NULL;)
        kb_share_lag_each_of(b, g, fn, arg);
}

static void add_row(void *arg, const kb_share_lag_row *row)
{
    kb_share_lag_group_row *out = arg;
    out->partitions++;
    if (row->lag > 0)
        out->lag += row->lag;
}

void kb_share_lag_group_of(kb_broker *b, const kb_group *g, kb_share_lag_group_row *out)
{
    *out = (kb_share_lag_group_row){g->id, g->sg != NULL ? g->sg->nmembers : 0, 0, 0};
    kb_share_lag_each_of(b, g, add_row, out);
}
