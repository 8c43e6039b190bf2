/*
 * ks_offmap: the log cleaner's key -> latest offset map, of fixed capacity.
 *
 * Job: remember, for each record key seen in a dirty range, the largest
 * offset holding it, in bounded memory. Keys are not stored: a key is
 * reduced to a 128-bit hash (our own two-lane multiply/rotate hash with a
 * 64-bit finaliser per lane, not cryptographic), as Kafka reduces keys to
 * their MD5. Two keys colliding on 128 bits would make the cleaner drop the
 * older one's latest record; for non-adversarial keys the odds are ~2^-128
 * per pair.
 *
 * Invariants:
 *   1. At most max_keys distinct keys are held; ks_offmap_put of a new key
 *      into a full map fails with KP_ERR__AGAIN and changes nothing.
 *   2. ks_offmap_get returns the largest offset put for the key, -1 if none.
 *   3. The table (open addressing, linear probing) stays at most 3/4 full;
 *      it grows by doubling up to the size max_keys needs, so a small dirty
 *      range costs little memory: <= 32 bytes per key of max_keys at most.
 *
 * Ownership: _init/_fini embed it; the table is malloc()ed.
 * Threading: none shared; one thread at a time.
 * Errors: KP_ERR__NOMEM, KP_ERR__AGAIN (full), KP_ERR__INVAL (max_keys < 1).
 */
#ifndef KS_OFFMAP_H
#define KS_OFFMAP_H

#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

typedef struct ks_offmap_slot {
    uint64_t h1, h2; /* the key's hash */
    int64_t offset;  /* -1: empty slot */
} ks_offmap_slot;

typedef struct ks_offmap {
    ks_offmap_slot *slots;
    uint64_t nslots;  /* power of two */
    int64_t count;    /* distinct keys held */
    int64_t max_keys; /* invariant 1 */
} ks_offmap;

kp_err ks_offmap_init(ks_offmap *m, int64_t max_keys);
void ks_offmap_fini(ks_offmap *m);

/* Records offset for key (keeping the larger one when the key is known). */
kp_err ks_offmap_put(ks_offmap *m, const uint8_t *key, size_t len, int64_t offset);
int64_t ks_offmap_get(const ks_offmap *m, const uint8_t *key, size_t len);

/* The 128-bit hash (exposed for tests). */
void ks_offmap_hash(const uint8_t *key, size_t len, uint64_t *h1, uint64_t *h2);

#endif
