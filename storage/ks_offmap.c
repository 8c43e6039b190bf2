#include "ks_offmap.h"

#include <stdlib.h>
#include <string.h>

#define INITIAL_SLOTS ((uint64_t)1024)

static uint64_t rotl(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64 - r));
}

/* A 64-bit avalanche finaliser: every input bit flips each output bit with
 * probability close to 1/2. */
static uint64_t fin(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ULL;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dULL;
    x ^= x >> 33;
    return x;
}

static uint64_t load_tail(const uint8_t *p, size_t n)
{
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)p[i] << (8 * i);
    return w;
}

void ks_offmap_hash(const uint8_t *key, size_t len, uint64_t *h1, uint64_t *h2)
{
    uint64_t a = 0x243f6a8885a308d3ULL ^ (uint64_t)len;
    uint64_t b = 0x13198a2e03707344ULL + (uint64_t)len * 0x9e3779b97f4a7c15ULL;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = load_tail(key + i, 8);
        a = rotl(a ^ (w * 0xa0761d6478bd642fULL), 29) * 0xe7037ed1a0b428dbULL;
        b = rotl(b + w, 37) * 0x8ebc6af09c88c6e3ULL ^ a;
    }
    uint64_t t = load_tail(key + i, len - i);
    a = rotl(a ^ (t * 0xa0761d6478bd642fULL), 29) * 0xe7037ed1a0b428dbULL;
    b = rotl(b + t, 37) * 0x8ebc6af09c88c6e3ULL;
    *h1 = fin(a ^ rotl(b, 17));
    *h2 = fin(b + a * 0x589965cc75374cc3ULL);
}

static ks_offmap_slot *alloc_slots(uint64_t n)
{
    ks_offmap_slot *s = malloc((size_t)n * sizeof(*s));
    if (s != NULL)
        for (uint64_t i = 0; i < n; i++)
            s[i].offset = -1;
    return s;
}

/* Slots needed so that max keys keep the table at most 3/4 full. */
static uint64_t slots_for(int64_t keys)
{
    uint64_t n = INITIAL_SLOTS;
    while ((uint64_t)keys * 4 > n * 3)
        n *= 2;
    return n;
}

kp_err ks_offmap_init(ks_offmap *m, int64_t max_keys)
{
    memset(m, 0, sizeof(*m));
    if (max_keys < 1 || max_keys > ((int64_t)1 << 40))
        return KP_ERR__INVAL;
    m->max_keys = max_keys;
    m->nslots = slots_for(max_keys < (int64_t)INITIAL_SLOTS ? max_keys : (int64_t)INITIAL_SLOTS / 2);
    m->slots = alloc_slots(m->nslots);
    return m->slots != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
}

void ks_offmap_fini(ks_offmap *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}

static ks_offmap_slot *probe(ks_offmap_slot *slots, uint64_t nslots, uint64_t h1, uint64_t h2)
{
    uint64_t mask = nslots - 1;
    for (uint64_t i = h1 & mask;; i = (i + 1) & mask) {
        ks_offmap_slot *s = &slots[i];
        if (s->offset < 0 || (s->h1 == h1 && s->h2 == h2))
            return s;
    }
}

static kp_err grow(ks_offmap *m)
{
    uint64_t n = m->nslots * 2;
    ks_offmap_slot *s = alloc_slots(n);
    if (s == NULL)
        return KP_ERR__NOMEM;
    for (uint64_t i = 0; i < m->nslots; i++)
        if (m->slots[i].offset >= 0)
            *probe(s, n, m->slots[i].h1, m->slots[i].h2) = m->slots[i];
    free(m->slots);
    m->slots = s;
    m->nslots = n;
    return KP_ERR_NONE;
}

kp_err ks_offmap_put(ks_offmap *m, const uint8_t *key, size_t len, int64_t offset)
{
    uint64_t h1, h2;
    ks_offmap_hash(key, len, &h1, &h2);
    ks_offmap_slot *s = probe(m->slots, m->nslots, h1, h2);
    if (s->offset >= 0) {
        if (offset > s->offset)
            s->offset = offset;
        return KP_ERR_NONE;
    }
    if (m->count >= m->max_keys)
        return KP_ERR__AGAIN;
    if ((uint64_t)(m->count + 1) * 4 > m->nslots * 3) {
        kp_err err = grow(m);
        if (err != KP_ERR_NONE)
            return err;
        s = probe(m->slots, m->nslots, h1, h2);
    }
    *s = (ks_offmap_slot){h1, h2, offset};
    m->count++;
    return KP_ERR_NONE;
}

int64_t ks_offmap_get(const ks_offmap *m, const uint8_t *key, size_t len)
{
    uint64_t h1, h2;
    ks_offmap_hash(key, len, &h1, &h2);
    const ks_offmap_slot *s = probe(m->slots, m->nslots, h1, h2);
    return s->offset;
}
