/*
 * kb_coord_load: one partition of an internal topic (__consumer_offsets,
 * __transaction_state) read back into its coordinator when this broker
 * becomes the partition's leader in cluster mode, as Kafka's coordinators
 * load a partition on election.
 *
 * Job: replay the partition's committed batches, from the log start to the
 * high watermark, through the coordinator's batch callback (the same one
 * its start-up replay uses), in bounded steps of about STEP bytes, one step
 * per turn of the event loop, so requests keep being served meanwhile.
 * What the previous leader wrote but the ISR did not yet confirm is waited
 * for: the load ends only once the high watermark is the log end.
 *
 * Invariants:
 *   1. Only batches below the high watermark reach the callback, each once,
 *      in offset order.
 *   2. done is called exactly once, unless kb_coord_load_cancel came first;
 *      the callbacks are never called after kb_coord_load_cancel.
 *   3. The load names its topic by name and looks it up at each step; it
 *      holds no segment between steps.
 * Ownership: the caller owns the kb_coord_load from start until done ran or
 * it cancelled it; the load frees itself then.
 * Threading: the loop's thread only.
 * Errors: done gets storage's errors, KP_ERR__CORRUPT for a batch that
 * fails its CRC, the callback's error, NOT_LEADER_OR_FOLLOWER when this
 * broker stops leading the partition, UNKNOWN_TOPIC_OR_PARTITION when the
 * topic went away.
 */
#ifndef KB_COORD_LOAD_H
#define KB_COORD_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_logscan.h"

typedef struct kb_coord_load kb_coord_load;
typedef void kb_coord_load_done_fn(void *arg, kp_err err, int64_t batches);

/* Starts loading partition p of topic; NULL when out of memory. Batches
 * larger than max_batch are passed with batch NULL (kb_logscan.h). */
kb_coord_load *kb_coord_load_start(kb_broker *b, const char *topic, int32_t p, size_t max_batch,
                                   kb_scan_batch_cb *cb, kb_coord_load_done_fn *done, void *arg);
void kb_coord_load_cancel(kb_coord_load *l);

/* The partitions of its internal topic a coordinator owns in cluster mode,
 * each NONE (another broker leads it), LOADING, LOADED or FAILED (a load
 * that failed: nothing of it is kept). The image's leadership drives it:
 * elected starts a load (begin makes the coordinator's replay state for
 * the partition, batch replays one batch into it, loaded ends it: with
 * NONE the partition is served, with an error the coordinator drops what
 * the replay made; the load's end is logged here); resigned cancels a load (loaded with NOT_COORDINATOR)
 * or unloads a loaded partition (unload drops its state). Both are
 * idempotent. */
typedef struct kb_coord_parts {
    kb_broker *b;
    const char *topic;
    size_t max_batch;
    void *(*begin)(void *arg, int32_t p); /* NULL: out of memory */
    kb_scan_batch_cb *batch;               /* called with begin's result */
    void (*loaded)(void *arg, void *ld, int32_t p, kp_err err); /* frees ld */
    void (*unload)(void *arg, int32_t p);
    void *arg;
    /* owned by kb_coord_parts_*: */
    int32_t n;
    uint8_t *state;
    struct cp_load **loads;
} kb_coord_parts;

void kb_coord_parts_elected(kb_coord_parts *cp, int32_t p);
void kb_coord_parts_resigned(kb_coord_parts *cp, int32_t p);
/* elected when leads, else resigned; nothing when cp is NULL (one node). */
void kb_coord_parts_move(kb_coord_parts *cp, int32_t p, bool leads);
/* What a request for partition p gets: NONE (loaded; always when cp is
 * NULL, a single node),
 * COORDINATOR_LOAD_IN_PROGRESS (loading, or not yet told of the election)
 * or COORDINATOR_NOT_AVAILABLE (the load failed). */
int16_t kb_coord_parts_check(const kb_coord_parts *cp, int32_t p);
bool kb_coord_parts_loading(const kb_coord_parts *cp, int32_t p);
/* Cancels the loads in flight and frees the table. */
void kb_coord_parts_fini(kb_coord_parts *cp);

#endif
