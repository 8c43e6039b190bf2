/*
 * kb_consumer_partitions: sets of topic partitions (topic id, partition) as the KIP-848
 * consumer groups keep them: a member's assigned, revoking and target
 * partitions (streams groups keep their tasks in them too); and the small
 * member rules the KIP-848-style groups share (epoch checks, string
 * fields).
 *
 * Invariants: a kb_cg_set is sorted by (topic id bytes, partition) with no
 * repeats, so membership is a binary search; kb_cg_tpvec_seal makes a
 * growing vector into such a set.
 *
 * Ownership: a set owns its array (kb_cg_set_free); sealing moves the
 * vector's array into the set and frees what the set held.
 *
 * Threading: no shared state.
 *
 * Errors: out of memory only, reported as false by kb_cg_tpvec_seal.
 */
#ifndef KB_CONSUMER_PARTITIONS_H
#define KB_CONSUMER_PARTITIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "kp_types.h"

typedef struct kb_cg_tp {
    kp_uuid topic;
    int32_t partition;
} kb_cg_tp;

typedef struct kb_cg_set {
    kb_cg_tp *v;
    int32_t n;
} kb_cg_set;

/* A growing set; kb_cg_tpvec_seal sorts it and drops repeats. Start it
 * zeroed; a failed push marks it nomem. */
typedef struct kb_cg_tpvec {
    kb_cg_set s;
    int32_t cap;
    bool nomem;
} kb_cg_tpvec;

bool kb_cg_set_has(const kb_cg_set *s, const kp_uuid *topic, int32_t partition);
void kb_cg_set_free(kb_cg_set *s);
void kb_cg_tpvec_push(kb_cg_tpvec *t, const kp_uuid *topic, int32_t partition);
/* Moves t's contents into *out (replacing it); false when out of memory. */
bool kb_cg_tpvec_seal(kb_cg_tpvec *t, kb_cg_set *out);
bool kb_cg_set_eq(const kb_cg_set *a, const kb_cg_set *b);
/* Whether a and b share an element. */
bool kb_cg_set_meets(const kb_cg_set *a, const kb_cg_set *b);
bool kb_cg_set_subset(const kb_cg_set *a, const kb_cg_set *of);

/* Kafka's throwIfMemberEpochIsInvalid, shared by consumer and streams
 * groups: a request at epoch is fenced when it runs ahead of the member's
 * epoch cur, or behind it unless it is the previous epoch prev and the
 * member still owns (owned, when sent) only what it holds (held). */
bool kb_cg_epoch_fenced(int32_t cur, int32_t prev, int32_t epoch, const kb_cg_set *owned,
                        bool has_owned, const kb_cg_set *held);

/* An offset commit's or fetch's member epoch against the member's
 * (member_epoch NULL: no such member): UNKNOWN_MEMBER_ID,
 * STALE_MEMBER_EPOCH or NONE, as Kafka's validateOffsetCommit/Fetch. */
kp_err kb_cg_offsets_epoch(const int32_t *member_epoch, int32_t epoch);

/* Replaces *field with a copy of s unless s is null; true when it changed
 * (*nomem set when the copy failed). */
bool kb_cg_set_str(char **field, kp_str s, bool *nomem);

#endif
