#include "kb_map.h"

#include <stdlib.h>

static char removed_marker;
#define KB_MAP_REMOVED ((void *)&removed_marker)

#define MIN_CAP 16

/* FNV-1a over the bytes; kb_map_hash_more's final mix spreads them over
 * the low bits the slot index is taken from. */
static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++) {
        h ^= b[i];
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t kb_map_mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t kb_map_hash_more(uint64_t h, const void *p, size_t len)
{
    return kb_map_mix(fnv(h, p, len));
}

uint64_t kb_map_hash_bytes(const void *p, size_t len)
{
    return kb_map_hash_more(1469598103934665603ull, p, len);
}

uint64_t kb_map_hash_str(kp_str s)
{
    return kb_map_hash_bytes(s.p, s.len > 0 ? (size_t)s.len : 0);
}

void kb_map_init(kb_map *m)
{
    *m = (kb_map){0};
}

void kb_map_fini(kb_map *m)
{
    free(m->slots);
    kb_map_init(m);
}

static bool held(const kb_map_slot *s)
{
    return s->entry != NULL && s->entry != KB_MAP_REMOVED;
}

void *kb_map_find(const kb_map *m, uint64_t hash, const void *key, kb_map_match_fn *match)
{
    if (m->n == 0)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        const kb_map_slot *s = &m->slots[i];
        if (s->entry == NULL)
            return NULL;
        if (held(s) && s->hash == hash && match(s->entry, key))
            return s->entry;
    }
}

/* Puts entry in the first free or removed slot of its probe. */
static void place(kb_map_slot *slots, size_t cap, uint64_t hash, void *entry, bool *reused)
{
    size_t mask = cap - 1, i = (size_t)hash & mask;
    while (held(&slots[i]))
        i = (i + 1) & mask;
    *reused = slots[i].entry == KB_MAP_REMOVED;
    slots[i] = (kb_map_slot){hash, entry};
}

/* New slots for n + 1 entries at most half full, tombstones dropped. */
static kp_err resize(kb_map *m)
{
    size_t cap = MIN_CAP;
    while (cap < (m->n + 1) * 2)
        cap *= 2;
    kb_map_slot *slots = calloc(cap, sizeof(*slots));
    if (slots == NULL)
        return KP_ERR__NOMEM;
    bool reused;
    for (size_t i = 0; i < m->cap; i++)
        if (held(&m->slots[i]))
            place(slots, cap, m->slots[i].hash, m->slots[i].entry, &reused);
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    m->used = m->n;
    return KP_ERR_NONE;
}

kp_err kb_map_insert(kb_map *m, uint64_t hash, void *entry)
{
    if ((m->used + 1) * 4 > m->cap * 3 && resize(m) != KP_ERR_NONE)
        return KP_ERR__NOMEM;
    bool reused;
    place(m->slots, m->cap, hash, entry, &reused);
    m->n++;
    if (!reused)
        m->used++;
    return KP_ERR_NONE;
}

/* The slot of the first entry along hash's probe that pick() accepts. */
static kb_map_slot *probe(const kb_map *m, uint64_t hash, bool (*pick)(const void *, const void *,
                                                                       kb_map_match_fn *),
                          const void *key, kb_map_match_fn *match)
{
    if (m->n == 0)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = (size_t)hash & mask;; i = (i + 1) & mask) {
        kb_map_slot *s = &m->slots[i];
        if (s->entry == NULL)
            return NULL;
        if (held(s) && s->hash == hash && pick(s->entry, key, match))
            return s;
    }
}

static bool by_key(const void *entry, const void *key, kb_map_match_fn *match)
{
    return match(entry, key);
}

static bool by_pointer(const void *entry, const void *wanted, kb_map_match_fn *match)
{
    (void)match;
    return entry == wanted;
}

static void *take(kb_map *m, kb_map_slot *s)
{
    if (s == NULL)
        return NULL;
    void *entry = s->entry;
    s->entry = KB_MAP_REMOVED;
    m->n--;
    return entry;
}

void *kb_map_remove(kb_map *m, uint64_t hash, const void *key, kb_map_match_fn *match)
{
    return take(m, probe(m, hash, by_key, key, match));
}

bool kb_map_remove_entry(kb_map *m, uint64_t hash, const void *entry)
{
    return take(m, probe(m, hash, by_pointer, entry, NULL)) != NULL;
}

void *kb_map_next(const kb_map *m, size_t *cursor)
{
    while (*cursor < m->cap) {
        const kb_map_slot *s = &m->slots[(*cursor)++];
        if (held(s))
            return s->entry;
    }
    return NULL;
}
