#include "kb_consumer_partitions.h"

#include <stdlib.h>
#include <string.h>

static int cmp_tp(const void *a, const void *b)
{
    const kb_cg_tp *x = a, *y = b;
    int c = memcmp(x->topic.b, y->topic.b, sizeof(x->topic.b));
    return c != 0 ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

bool kb_cg_set_has(const kb_cg_set *s, const kp_uuid *topic, int32_t partition)
{
    kb_cg_tp key = {*topic, partition};
    return s->n > 0 && bsearch(&key, s->v, (size_t)s->n, sizeof(key), cmp_tp) != NULL;
}

void kb_cg_set_free(kb_cg_set *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

void kb_cg_tpvec_push(kb_cg_tpvec *t, const kp_uuid *topic, int32_t partition)
{
    if (t->s.n == t->cap) {
        int32_t cap = t->cap < 8 ? 8 : t->cap * 2;
        kb_cg_tp *v = realloc(t->s.v, (size_t)cap * sizeof(*v));
        if (v == NULL) {
            t->nomem = true;
            return;
        }
        t->s.v = v;
        t->cap = cap;
    }
    t->s.v[t->s.n++] = (kb_cg_tp){*topic, partition};
}

/* Moves t's contents into *out (replacing it); false when out of memory. */
bool kb_cg_tpvec_seal(kb_cg_tpvec *t, kb_cg_set *out)
{
    if (t->nomem) {
        kb_cg_set_free(&t->s);
        return false;
    }
    if (t->s.n > 1)
        qsort(t->s.v, (size_t)t->s.n, sizeof(*t->s.v), cmp_tp);
    int32_t k = 0;
    for (int32_t i = 0; i < t->s.n; i++)
        if (k == 0 || cmp_tp(&t->s.v[k - 1], &t->s.v[i]) != 0)
            t->s.v[k++] = t->s.v[i];
    t->s.n = k;
    kb_cg_set_free(out);
    *out = t->s;
    return true;
}

bool kb_cg_set_eq(const kb_cg_set *a, const kb_cg_set *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->v, b->v, (size_t)a->n * sizeof(*a->v)) == 0);
}

/* Whether a and b share an element. */
bool kb_cg_set_meets(const kb_cg_set *a, const kb_cg_set *b)
{
    for (int32_t i = 0; i < a->n; i++)
        if (kb_cg_set_has(b, &a->v[i].topic, a->v[i].partition))
            return true;
    return false;
}

bool kb_cg_set_subset(const kb_cg_set *a, const kb_cg_set *of)
{
    for (int32_t i = 0; i < a->n; i++)
        if (!kb_cg_set_has(of, &a->v[i].topic, a->v[i].partition))
            return false;
    return true;
}

bool kb_cg_epoch_fenced(int32_t cur, int32_t prev, int32_t epoch, const kb_cg_set *owned,
                        bool has_owned, const kb_cg_set *held)
{
    if (epoch > cur)
        return true;
    return epoch < cur && (epoch != prev || !has_owned || !kb_cg_set_subset(owned, held));
}

kp_err kb_cg_offsets_epoch(const int32_t *member_epoch, int32_t epoch)
{
    if (member_epoch == NULL)
        return KP_ERR_UNKNOWN_MEMBER_ID;
    return epoch != *member_epoch ? KP_ERR_STALE_MEMBER_EPOCH : KP_ERR_NONE;
}

bool kb_cg_set_str(char **field, kp_str s, bool *nomem)
{
    if (s.len < 0 || kp_cstr_is(*field, s))
        return false;
    char *c = kp_str_cdup(s);
    if (c == NULL) {
        *nomem = true;
        return false;
    }
    free(*field);
    *field = c;
    return true;
}
