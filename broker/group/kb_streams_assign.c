/* kb_streams_assign: the task assignor of streams groups (declared in
 * kb_streams_group.h). Kafka's default is its "sticky" task assignor; this
 * one keeps its properties that clients see: every active task has exactly
 * one owner, members' active counts differ by at most one, a task stays with
 * its previous owner when that keeps the balance, and standby copies go to
 * members of other processes than the task's active owner (none when there
 * is no such process). It does not weigh processes by lag (no warm-ups). */
#include <stdlib.h>
#include <string.h>

#include "kb_streams_group.h"

typedef struct assign_ctx {
    kb_st_member **m;
    int32_t n;
    const kb_streams_topology *t;
    int32_t *first;  /* flat index of each subtopology's task 0 */
    int32_t ntasks;
    int32_t *owner;  /* member index per task, -1 */
    int32_t *load;   /* active tasks per member */
    int32_t *sload;  /* standby tasks per member */
    int32_t *proc;   /* process index per member */
    int32_t base, extra, extras_used;
} assign_ctx;

static int32_t task_index(const assign_ctx *c, const kb_cg_tp *tp)
{
    int32_t sub = kb_st_task_sub(tp);
    if (sub < 0 || sub >= c->t->nsubs || tp->partition < 0 ||
        tp->partition >= c->t->subs[sub].ntasks)
        return -1;
    return c->first[sub] + tp->partition;
}

static bool can_take(const assign_ctx *c, int32_t i)
{
    return c->load[i] < c->base || (c->load[i] == c->base && c->extras_used < c->extra);
}

static void give(assign_ctx *c, int32_t task, int32_t i)
{
    c->owner[task] = i;
    if (c->load[i]++ == c->base)
        c->extras_used++;
}

static void keep_sticky(assign_ctx *c, const kb_cg_set *prev, int32_t i)
{
    for (int32_t k = 0; k < prev->n; k++) {
        int32_t task = task_index(c, &prev->v[k]);
        if (task >= 0 && c->owner[task] < 0 && can_take(c, i))
            give(c, task, i);
    }
}

static int cmp_proc(const void *a, const void *b, void *arg)
{
    kb_st_member *const *m = arg;
    const char *x = m[*(const int32_t *)a]->process_id, *y = m[*(const int32_t *)b]->process_id;
    return strcmp(x != NULL ? x : "", y != NULL ? y : "");
}

/* proc[i]: the index of member i's process (members without one share ""). */
static kp_err index_processes(assign_ctx *c)
{
    int32_t *order = calloc((size_t)c->n, sizeof(*order));
    if (order == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < c->n; i++)
        order[i] = i;
    qsort_r(order, (size_t)c->n, sizeof(*order), cmp_proc, c->m);
    for (int32_t k = 0, p = 0; k < c->n; k++) {
        if (k > 0 && cmp_proc(&order[k - 1], &order[k], c->m) != 0)
            p++;
        c->proc[order[k]] = p;
    }
    free(order);
    return KP_ERR_NONE;
}

/* The least-loaded member that can take one more active task. */
static int32_t least_loaded(const assign_ctx *c)
{
    int32_t best = -1;
    for (int32_t i = 0; i < c->n; i++)
        if (can_take(c, i) && (best < 0 || c->load[i] < c->load[best]))
            best = i;
    return best;
}

/* The member for standby copy of task: another process than those in
 * taken[0..ntaken), fewest standbys first. */
static int32_t standby_for(const assign_ctx *c, const int32_t *taken, int32_t ntaken)
{
    int32_t best = -1;
    for (int32_t i = 0; i < c->n; i++) {
        bool clash = false;
        for (int32_t k = 0; k < ntaken && !clash; k++)
            clash = c->proc[i] == taken[k];
        if (!clash && (best < 0 || c->sload[i] < c->sload[best]))
            best = i;
    }
    return best;
}

static kp_err fill_targets(assign_ctx *c, int32_t num_standby)
{
    kb_cg_tpvec *act = calloc((size_t)c->n, sizeof(*act));
    kb_cg_tpvec *stb = calloc((size_t)c->n, sizeof(*stb));
    int32_t taken[8];
    if (num_standby > 6)
        num_standby = 6;
    kp_err e = act == NULL || stb == NULL ? KP_ERR__NOMEM : KP_ERR_NONE;
    for (int32_t s = 0; e == KP_ERR_NONE && s < c->t->nsubs; s++) {
        kp_uuid id = kb_st_task_id(s);
        for (int32_t p = 0; p < c->t->subs[s].ntasks; p++) {
            int32_t o = c->owner[c->first[s] + p];
            kb_cg_tpvec_push(&act[o], &id, p);
            taken[0] = c->proc[o];
            for (int32_t r = 0; r < num_standby; r++) {
                int32_t i = standby_for(c, taken, r + 1);
                if (i < 0)
                    break;
                taken[r + 1] = c->proc[i];
                c->sload[i]++;
                kb_cg_tpvec_push(&stb[i], &id, p);
            }
        }
    }
    for (int32_t i = 0; i < c->n; i++) {
        if (act != NULL && !kb_cg_tpvec_seal(&act[i], &c->m[i]->target_active))
            e = KP_ERR__NOMEM;
        if (stb != NULL && !kb_cg_tpvec_seal(&stb[i], &c->m[i]->target_standby))
            e = KP_ERR__NOMEM;
    }
    free(act);
    free(stb);
    return e;
}

kp_err kb_streams_assign(kb_st_member **members, int32_t n, const kb_streams_topology *t,
                         int32_t num_standby)
{
    static const kb_streams_topology none = {0};
    if (n <= 0)
        return KP_ERR_NONE;
    assign_ctx c = {.m = members, .n = n, .t = t != NULL ? t : &none};
    c.first = calloc((size_t)c.t->nsubs + 1, sizeof(int32_t));
    for (int32_t s = 0; c.first != NULL && s < c.t->nsubs; s++) {
        c.first[s] = c.ntasks;
        c.ntasks += c.t->subs[s].ntasks;
    }
    c.owner = malloc(((size_t)c.ntasks + 1) * sizeof(int32_t));
    c.load = calloc((size_t)n, sizeof(int32_t));
    c.sload = calloc((size_t)n, sizeof(int32_t));
    c.proc = calloc((size_t)n, sizeof(int32_t));
    kp_err e = KP_ERR__NOMEM;
    if (c.first == NULL || c.owner == NULL || c.load == NULL || c.sload == NULL ||
        c.proc == NULL || index_processes(&c) != KP_ERR_NONE)
        goto out;
    memset(c.owner, 0xff, ((size_t)c.ntasks + 1) * sizeof(int32_t));
    c.base = c.ntasks / n;
    c.extra = c.ntasks % n;
    for (int32_t i = 0; i < n; i++)
        keep_sticky(&c, &members[i]->target_active, i);
    for (int32_t i = 0; i < n; i++)
        keep_sticky(&c, &members[i]->active, i);
    for (int32_t task = 0; task < c.ntasks; task++)
        if (c.owner[task] < 0)
            give(&c, task, least_loaded(&c));
    e = fill_targets(&c, num_standby);
out:
    free(c.first);
    free(c.owner);
    free(c.load);
    free(c.sload);
    free(c.proc);
    return e;
}
