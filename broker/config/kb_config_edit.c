#include "kb_config_edit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kb_cfgset_fini(kb_cfgset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].key);
        free(s->v[i].value);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const kb_topic_config *)a)->key, ((const kb_topic_config *)b)->key);
}

static int key_cmp(const void *k, const void *e)
{
    return strcmp(k, ((const kb_topic_config *)e)->key);
}

static kb_topic_config *find(const kb_cfgset *s, const char *key)
{
    if (s->n == 0)
        return NULL;
    return bsearch(key, s->v, s->n, sizeof(*s->v), key_cmp);
}

const char *kb_cfgset_get(const kb_cfgset *s, const char *key)
{
    const kb_topic_config *e = find(s, key);
    return e != NULL ? e->value : NULL;
}

kp_err kb_cfgset_copy(kb_cfgset *dst, const kb_topic_config *v, size_t n)
{
    dst->n = 0;
    dst->v = calloc(n + 1, sizeof(*dst->v));
    if (dst->v == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < n; i++, dst->n++) {
        dst->v[i].key = strdup(v[i].key);
        dst->v[i].value = strdup(v[i].value);
        if (dst->v[i].key == NULL || dst->v[i].value == NULL) {
            dst->n++;
            kb_cfgset_fini(dst);
            return KP_ERR__NOMEM;
        }
    }
    qsort(dst->v, dst->n, sizeof(*dst->v), entry_cmp);
    return KP_ERR_NONE;
}

static void remove_at(kb_cfgset *s, kb_topic_config *e)
{
    size_t i = (size_t)(e - s->v);
    free(e->key);
    free(e->value);
    memmove(&s->v[i], &s->v[i + 1], (s->n - i - 1) * sizeof(*s->v));
    s->n--;
}

kp_err kb_cfgset_put(kb_cfgset *s, const char *key, const char *value)
{
    kb_topic_config *e = find(s, key);
    if (value == NULL) {
        if (e != NULL)
            remove_at(s, e);
        return KP_ERR_NONE;
    }
    char *v = strdup(value);
    if (v == NULL)
        return KP_ERR__NOMEM;
    if (e != NULL) {
        free(e->value);
        e->value = v;
        return KP_ERR_NONE;
    }
    kb_topic_config *nv = realloc(s->v, (s->n + 1) * sizeof(*nv));
    char *k = strdup(key);
    if (nv != NULL)
        s->v = nv;
    if (nv == NULL || k == NULL) {
        free(k);
        free(v);
        return KP_ERR__NOMEM;
    }
    s->v[s->n++] = (kb_topic_config){k, v};
    qsort(s->v, s->n, sizeof(*s->v), entry_cmp);
    return KP_ERR_NONE;
}

/* True when item (len bytes) is one of list's comma-separated items. */
static bool list_has(const char *list, const char *item, size_t len)
{
    for (const char *p = list; *p != '\0';) {
        size_t n = strcspn(p, ",");
        if (n == len && strncmp(p, item, len) == 0)
            return true;
        p += n + (p[n] == ',');
    }
    return false;
}

/* Writes into out (cap bytes) the items of a not in b (subtract) or the
 * items of a followed by those of b not yet present (append). */
static bool list_merge(const char *a, const char *b, bool subtract, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    const char *src[2] = {a, subtract ? "" : b};
    for (int s = 0; s < 2; s++) {
        for (const char *p = src[s]; *p != '\0';) {
            size_t n = strcspn(p, ",");
            bool keep = n > 0 && !list_has(out, p, n) && !(subtract && list_has(b, p, n));
            if (keep) {
                if (o + n + 2 > cap)
                    return false;
                o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? "," : "", (int)n, p);
            }
            p += n + (p[n] == ',');
        }
    }
    return true;
}

static kp_err apply_list(kb_cfgset *s, const char *key, int8_t op, const char *value,
                         const char *base, kb_msgbuf *msg)
{
    const char *cur = kb_cfgset_get(s, key);
    if (cur == NULL)
        cur = base != NULL ? base : "";
    size_t cap = strlen(cur) + strlen(value) + 2;
    char *out = malloc(cap);
    if (out == NULL)
        return KP_ERR__NOMEM;
    kp_err e = KP_ERR__NOMEM;
    if (list_merge(cur, value, op == KB_CFG_OP_SUBTRACT, out, cap))
        e = kb_cfgset_put(s, key, out);
    else
        kb_msgf(msg, "Config value too long for %s", key);
    free(out);
    return e;
}

kp_err kb_cfgset_apply(kb_cfgset *s, const char *key, int8_t op, const char *value, bool is_list,
                       const char *base, kb_msgbuf *msg)
{
    switch (op) {
    case KB_CFG_OP_SET:
        if (value == NULL) {
            kb_msgf(msg, "Null value not supported for : %s", key);
            return KP_ERR_INVALID_REQUEST;
        }
        return kb_cfgset_put(s, key, value);
    case KB_CFG_OP_DELETE:
        return kb_cfgset_put(s, key, NULL);
    case KB_CFG_OP_APPEND:
    case KB_CFG_OP_SUBTRACT:
        if (!is_list) {
            kb_msgf(msg, "Config value %s is not allowed for config key: %s",
                    op == KB_CFG_OP_APPEND ? "append" : "subtract", key);
            return KP_ERR_INVALID_CONFIG;
        }
        if (value == NULL) {
            kb_msgf(msg, "Null value not supported for : %s", key);
            return KP_ERR_INVALID_REQUEST;
        }
        return apply_list(s, key, op, value, base, msg);
    default:
        kb_msgf(msg, "Unknown alter config operation %d for %s", op, key);
        return KP_ERR_INVALID_REQUEST;
    }
}

bool kb_cfg_has_duplicate(const kp_str *names, size_t stride, int32_t n, kp_str *dup)
{
    const char *base = (const char *)names;
    for (int32_t i = 0; i < n; i++) {
        const kp_str *a = (const kp_str *)(const void *)(base + (size_t)i * stride);
        for (int32_t j = i + 1; j < n; j++) {
            const kp_str *b = (const kp_str *)(const void *)(base + (size_t)j * stride);
            if (a->len == b->len && a->len >= 0 && memcmp(a->p, b->p, (size_t)a->len) == 0) {
                *dup = *a;
                return true;
            }
        }
    }
    return false;
}
