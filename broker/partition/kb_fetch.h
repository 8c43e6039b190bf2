/*
 * kb_fetch: the fetch long poll: fetches that wait for min_bytes are parked
 * here until an append to one of their partitions brings enough data, or
 * max_wait_ms passes, or their connection closes.
 *
 * Invariants:
 *   1. A parked fetch is on the waiters list and has its timer armed; it
 *      holds no segment reference while parked.
 *   2. Every parked fetch is answered exactly once, or cancelled with its
 *      connection.
 *
 * Ownership: the broker owns the waiters list; each parked fetch owns its
 * state, freed with the response (or on cancel).
 * Threading: loop thread only.
 */
#ifndef KB_FETCH_H
#define KB_FETCH_H

#include "kb_config.h"
#include "kb_context.h"
#include "kb_topics.h"

kp_err kb_fetch_start(kb_broker *b);
void kb_fetch_stop(kb_broker *b);

#endif
