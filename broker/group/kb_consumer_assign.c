#include "kb_consumer_assign.h"

#include <stdlib.h>
#include <string.h>

/* A topic id and its index in the assignor's topic list. */
typedef struct topic_ix {
    kp_uuid id;
    int32_t ti;
} topic_ix;

/* Per-topic partition owners (member index, -1 none) while assigning. */
typedef struct owners {
    int32_t **own;
    int32_t *count; /* per member */
    const kb_cg_topic *topics;
    int32_t ntopics;
    topic_ix *by_id; /* sorted by id */
} owners;

static int cmp_topic_ix(const void *a, const void *b)
{
    return memcmp(((const topic_ix *)a)->id.b, ((const topic_ix *)b)->id.b, sizeof(kp_uuid));
}

static void owners_fini(owners *o)
{
    for (int32_t i = 0; o->own != NULL && i < o->ntopics; i++)
        free(o->own[i]);
    free(o->own);
    free(o->count);
    free(o->by_id);
}

static kp_err owners_init(owners *o, int32_t nmembers, const kb_cg_topic *topics, int32_t nt)
{
    o->topics = topics;
    o->ntopics = nt;
    o->own = calloc((size_t)nt + 1, sizeof(*o->own));
    o->count = calloc((size_t)nmembers + 1, sizeof(*o->count));
    o->by_id = calloc((size_t)nt + 1, sizeof(*o->by_id));
    if (o->own == NULL || o->count == NULL || o->by_id == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < nt; i++)
        o->by_id[i] = (topic_ix){topics[i].id, i};
    if (nt > 1)
        qsort(o->by_id, (size_t)nt, sizeof(*o->by_id), cmp_topic_ix);
    for (int32_t i = 0; i < nt; i++) {
        int32_t np = topics[i].npartitions > 0 ? topics[i].npartitions : 0;
        if ((o->own[i] = malloc(((size_t)np + 1) * sizeof(int32_t))) == NULL)
            return KP_ERR__NOMEM;
        for (int32_t p = 0; p < np; p++)
            o->own[i][p] = -1;
    }
    return KP_ERR_NONE;
}

/* Writes every member's target from the owners table (one pass over the
 * partitions). */
static kp_err owners_emit(const owners *o, kb_cg_member **members, int32_t n)
{
    kb_cg_tpvec *t = calloc((size_t)n + 1, sizeof(*t));
    if (t == NULL)
        return KP_ERR__NOMEM;
    for (int32_t ti = 0; ti < o->ntopics; ti++)
        for (int32_t p = 0; p < o->topics[ti].npartitions; p++)
            if (o->own[ti][p] >= 0)
                kb_cg_tpvec_push(&t[o->own[ti][p]], &o->topics[ti].id, p);
    kp_err err = KP_ERR_NONE;
    for (int32_t mi = 0; mi < n; mi++) {
        kb_cg_set s = {0};
        if (!kb_cg_tpvec_seal(&t[mi], &s)) {
            err = KP_ERR__NOMEM;
            continue;
        }
        if (!kb_cg_set_eq(&s, &members[mi]->target))
            members[mi]->dirty |= KB_CG_DIRTY_TARGET;
        kb_cg_set_free(&members[mi]->target);
        members[mi]->target = s;
    }
    free(t);
    return err;
}

static int32_t topic_by_id(const owners *o, const kp_uuid *id)
{
    topic_ix key = {*id, 0};
    const topic_ix *x = o->ntopics > 0 ? bsearch(&key, o->by_id, (size_t)o->ntopics,
                                                 sizeof(key), cmp_topic_ix)
                                       : NULL;
    return x != NULL ? x->ti : -1;
}

/* The eligible member with the fewest partitions, -1 when none. */
static int32_t least_loaded(kb_cg_member **members, int32_t n, const owners *o, const char *topic)
{
    int32_t best = -1;
    for (int32_t mi = 0; mi < n; mi++)
        if (kb_cg_member_subscribes(members[mi], topic) &&
            (best < 0 || o->count[mi] < o->count[best]))
            best = mi;
    return best;
}

/* Keeps each member's previous target where still valid, within its share. */
static void uniform_sticky(kb_cg_member **members, int32_t n, owners *o, int32_t base,
                           int32_t extra)
{
    for (int32_t mi = 0; mi < n; mi++) {
        const kb_cg_set *prev = &members[mi]->target;
        for (int32_t k = 0; k < prev->n; k++) {
            int32_t ti = topic_by_id(o, &prev->v[k].topic);
            int32_t p = prev->v[k].partition;
            if (ti < 0 || p < 0 || p >= o->topics[ti].npartitions || o->own[ti][p] >= 0 ||
                !kb_cg_member_subscribes(members[mi], o->topics[ti].name))
                continue;
            if (o->count[mi] >= base && (o->count[mi] > base || extra == 0))
                continue;
            if (o->count[mi] == base)
                extra--;
            o->own[ti][p] = mi;
            o->count[mi]++;
        }
    }
}

/* Moves partitions from members with two more than an eligible other. */
static void uniform_balance(kb_cg_member **members, int32_t n, owners *o)
{
    for (int pass = 0; pass < 4; pass++) {
        bool moved = false;
        for (int32_t ti = 0; ti < o->ntopics; ti++) {
            for (int32_t p = 0; p < o->topics[ti].npartitions; p++) {
                int32_t a = o->own[ti][p];
                int32_t b = least_loaded(members, n, o, o->topics[ti].name);
                if (a < 0 || b < 0 || o->count[b] + 1 >= o->count[a])
                    continue;
                o->own[ti][p] = b;
                o->count[a]--;
                o->count[b]++;
                moved = true;
            }
        }
        if (!moved)
            return;
    }
}

/* Every member subscribes to every topic: fill each to base, then hand the
 * rest out one each to members still at base (sticky kept at most one
 * extra per member), in O(partitions + members). */
static void uniform_fill_even(owners *o, int32_t n, int32_t base)
{
    int32_t low = 0, extra = 0;
    for (int32_t ti = 0; ti < o->ntopics; ti++) {
        for (int32_t p = 0; p < o->topics[ti].npartitions; p++) {
            if (o->own[ti][p] >= 0)
                continue;
            while (low < n && o->count[low] >= base)
                low++;
            while (low == n && extra < n && o->count[extra] != base)
                extra++;
            int32_t mi = low < n ? low : extra;
            if (mi >= n)
                return; /* cannot happen: the counts add up to the total */
            o->own[ti][p] = mi;
            o->count[mi]++;
        }
    }
}

/* Mixed subscriptions: each free partition to the least loaded member
 * subscribing to its topic (O(partitions x members)). */
static void uniform_fill_greedy(kb_cg_member **members, int32_t n, owners *o)
{
    for (int32_t ti = 0; ti < o->ntopics; ti++) {
        for (int32_t p = 0; p < o->topics[ti].npartitions; p++) {
            int32_t mi = o->own[ti][p] >= 0 ? -1 : least_loaded(members, n, o, o->topics[ti].name);
            if (mi >= 0) {
                o->own[ti][p] = mi;
                o->count[mi]++;
            }
        }
    }
}

kp_err kb_consumer_assign_uniform(kb_cg_member **members, int32_t n, const kb_cg_topic *topics,
                                int32_t ntopics)
{
    owners o = {0};
    kp_err err = owners_init(&o, n, topics, ntopics);
    int64_t total = 0;
    int32_t subscribing = 0;
    bool homogeneous = true;
    for (int32_t ti = 0; err == KP_ERR_NONE && ti < ntopics; ti++) {
        int32_t k = 0;
        for (int32_t mi = 0; mi < n; mi++)
            k += kb_cg_member_subscribes(members[mi], topics[ti].name) ? 1 : 0;
        total += k > 0 ? topics[ti].npartitions : 0;
        homogeneous = homogeneous && (k == n);
    }
    for (int32_t mi = 0; mi < n; mi++) {
        bool any = false;
        for (int32_t ti = 0; !any && ti < ntopics; ti++)
            any = kb_cg_member_subscribes(members[mi], topics[ti].name);
        subscribing += any ? 1 : 0;
    }
    if (err == KP_ERR_NONE && subscribing > 0) {
        int32_t base = (int32_t)(total / subscribing);
        uniform_sticky(members, n, &o, base, (int32_t)(total % subscribing));
        if (homogeneous) {
            uniform_fill_even(&o, n, base);
        } else {
            uniform_fill_greedy(members, n, &o);
            uniform_balance(members, n, &o);
        }
    }
    if (err == KP_ERR_NONE)
        err = owners_emit(&o, members, n);
    owners_fini(&o);
    return err;
}

/* A member and its index, to walk members in member id order. */
typedef struct member_ix {
    const kb_cg_member *m;
    int32_t mi;
} member_ix;

static int cmp_member_id(const void *a, const void *b)
{
    return strcmp(((const member_ix *)a)->m->member_id, ((const member_ix *)b)->m->member_id);
}

kp_err kb_consumer_assign_range(kb_cg_member **members, int32_t n, const kb_cg_topic *topics,
                              int32_t ntopics)
{
    owners o = {0};
    int32_t *idx = calloc((size_t)n + 1, sizeof(*idx));
    member_ix *sorted = calloc((size_t)n + 1, sizeof(*sorted));
    kp_err err = owners_init(&o, n, topics, ntopics);
    if (idx == NULL || sorted == NULL)
        err = KP_ERR__NOMEM;
    for (int32_t mi = 0; err == KP_ERR_NONE && mi < n; mi++)
        sorted[mi] = (member_ix){members[mi], mi};
    if (err == KP_ERR_NONE && n > 1)
        qsort(sorted, (size_t)n, sizeof(*sorted), cmp_member_id);
    for (int32_t ti = 0; err == KP_ERR_NONE && ti < ntopics; ti++) {
        int32_t k = 0;
        for (int32_t s = 0; s < n; s++)
            if (kb_cg_member_subscribes(sorted[s].m, topics[ti].name))
                idx[k++] = sorted[s].mi;
        int32_t np = topics[ti].npartitions, p = 0;
        for (int32_t j = 0; j < k; j++) {
            int32_t share = np / k + (j < np % k ? 1 : 0);
            for (int32_t q = 0; q < share; q++)
                o.own[ti][p++] = idx[j];
        }
    }
    if (err == KP_ERR_NONE)
        err = owners_emit(&o, members, n);
    owners_fini(&o);
    free(idx);
    free(sorted);
    return err;
}
