/*
 * kb_map: the house's hash map: open addressing with linear probing, from a
 * 64-bit hash and a caller's key to a caller's entry pointer.
 *
 * Job: find, insert, remove and visit entries by key in O(1) expected time.
 * The map stores each entry's hash beside its pointer; the caller hashes
 * its key (kb_map_hash_*) and says whether an entry matches a key, so one
 * map serves any key (a name, a UUID, a topic and partition).
 *
 * Invariants:
 *   1. A slot is free, removed (a tombstone) or holds one entry; at most
 *      three quarters of the slots are held or removed, so every probe
 *      ends at a free slot.
 *   2. An entry is held at most once, and only one entry matches a key
 *      (kb_map_insert is called only after kb_map_find said none did).
 *   3. Removing leaves a tombstone, so a visit with kb_map_next that
 *      removes the entry it was just given sees every other entry exactly
 *      once. Inserting during a visit may reorder the slots: don't.
 *
 * Ownership: the map owns its slot array, never the entries; the caller
 * frees entries (after kb_map_next, or before kb_map_fini).
 *
 * Threading: none; the owner's thread. The hash is not seeded: callers
 * bound what a client can make them insert.
 *
 * Errors: kb_map_insert returns KP_ERR__NOMEM when the slots cannot grow
 * (the map is unchanged).
 */
#ifndef KB_MAP_H
#define KB_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_types.h"

typedef struct kb_map_slot {
    uint64_t hash;
    void *entry; /* NULL free, KB_MAP_REMOVED a tombstone */
} kb_map_slot;

typedef struct kb_map {
    kb_map_slot *slots;
    size_t cap;  /* a power of two, or 0 before the first insert */
    size_t n;    /* entries held */
    size_t used; /* entries held plus tombstones */
} kb_map;

/* Whether entry's key is key (whatever the caller's key type is). */
typedef bool kb_map_match_fn(const void *entry, const void *key);

uint64_t kb_map_hash_bytes(const void *p, size_t len);
uint64_t kb_map_hash_str(kp_str s);
/* splitmix64's finaliser: spreads nearby keys (ports, ids) over all bits. */
uint64_t kb_map_mix(uint64_t x);
/* Mixes more bytes into a hash, for keys of several parts. */
uint64_t kb_map_hash_more(uint64_t h, const void *p, size_t len);

void kb_map_init(kb_map *m);
/* Frees the slots, not the entries. */
void kb_map_fini(kb_map *m);

void *kb_map_find(const kb_map *m, uint64_t hash, const void *key, kb_map_match_fn *match);
kp_err kb_map_insert(kb_map *m, uint64_t hash, void *entry);
/* Removes the entry matching key and returns it; NULL if none did. */
void *kb_map_remove(kb_map *m, uint64_t hash, const void *key, kb_map_match_fn *match);
/* Removes this very entry (found by pointer along its hash's probe). */
bool kb_map_remove_entry(kb_map *m, uint64_t hash, const void *entry);

/* Entries one by one: start with *cursor = 0; NULL at the end. */
void *kb_map_next(const kb_map *m, size_t *cursor);

static inline size_t kb_map_count(const kb_map *m)
{
    return m->n;
}

#endif
