/*
 * kb_quota: client quotas: the stored quota entries (DescribeClientQuotas /
 * AlterClientQuotas) and their enforcement on produce and fetch byte rates.
 *
 * Job: keep Kafka's quota entities (user, client-id, ip; a NULL name is the
 * entity type's default) with their values (producer_byte_rate,
 * consumer_byte_rate, request_percentage, controller_mutation_rate,
 * connection_creation_rate), persist them, resolve which entry applies to a
 * (user, client-id) pair in Kafka's order of precedence, and measure each
 * quota's byte rate over sampled windows to compute the throttle time
 * Kafka would answer with.
 *
 * Rate math (Kafka's Rate over a SampledStat): `samples` windows of
 * `window_ms` each (quota.window.num, default 11; quota.window.size.seconds,
 * default 1). rate = bytes in live windows / elapsed, where elapsed runs
 * from the oldest live window's start to now and is at least
 * (samples - 1) * window_ms. When rate > quota,
 * throttle = (rate - quota) / quota * elapsed, capped at samples * window_ms.
 *
 * On disk (first entry of log.dirs): runnel-quotas.properties, one line per
 * entry: `quota <n> <type>=<name|%default>... <key>=<value>...`, names
 * %-escaped; written atomically.
 *
 * Invariants:
 *   1. An entry's entity list is sorted by type and holds each type once;
 *      no two entries have the same entity list; no entry has no values.
 *   2. A rate window's bytes are counted in exactly one window.
 *
 * Ownership: kb_quotas owns its entries and meters; views returned stay
 * valid until the next alter.
 * Threading: loop thread only.
 * Errors: KP_ERR__NOMEM, KP_ERR_KAFKA_STORAGE_ERROR, KP_ERR_INVALID_REQUEST
 * (a bad entity or key, with Kafka's message).
 */
#ifndef KB_QUOTA_H
#define KB_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_file.h"
#include "kb_msgbuf.h"

/* ---- rate meters (pure; unit tested) ------------------------------------- */

#define KB_RATE_MAX_SAMPLES 64

typedef struct kb_rate {
    int64_t window_ms;
    int32_t samples;
    int32_t current; /* index of the newest window */
    int64_t start_ms[KB_RATE_MAX_SAMPLES];
    double total[KB_RATE_MAX_SAMPLES];
} kb_rate;

void kb_rate_init(kb_rate *r, int64_t window_ms, int32_t samples, int64_t now_ms);
void kb_rate_record(kb_rate *r, double value, int64_t now_ms);
/* Per second. */
double kb_rate_measure(kb_rate *r, int64_t now_ms);
/* 0 when the rate is within quota (per second). */
int64_t kb_rate_throttle_ms(kb_rate *r, double quota, int64_t now_ms);

/* ---- quota entries --------------------------------------------------------- */

typedef struct kb_quota_entity {
    char *type; /* "user", "client-id", "ip" */
    char *name; /* NULL = the default entity */
} kb_quota_entity;

typedef struct kb_quota_value {
    char *key;
    double value;
} kb_quota_value;

typedef struct kb_quota_entry {
    size_t nentity;
    kb_quota_entity *entity;
    size_t nvalues;
    kb_quota_value *values;
} kb_quota_entry;

typedef struct kb_quotas kb_quotas;

kp_err kb_quotas_open(const char *dir, const kb_config *cfg, kb_quotas **out);
void kb_quotas_close(kb_quotas *q);

size_t kb_quotas_count(const kb_quotas *q);
const kb_quota_entry *kb_quotas_at(const kb_quotas *q, size_t i);

/* One AlterClientQuotas op on an entity (sorted by type, each type once). */
typedef struct kb_quota_op {
    const char *key;
    double value;
    bool remove;
} kb_quota_op;

/* Checks an entity and its ops as Kafka does (INVALID_REQUEST + msg). */
kp_err kb_quotas_check(const kb_quota_entity *entity, size_t nentity, const kb_quota_op *ops,
                       size_t nops, kb_msgbuf *msg);
/* Applies (after a successful check) and persists. */
kp_err kb_quotas_alter(kb_quotas *q, const kb_quota_entity *entity, size_t nentity,
                       const kb_quota_op *ops, size_t nops);

/* Which byte rate a request uses. */
typedef enum kb_quota_kind {
    KB_QUOTA_PRODUCE = 0,
    KB_QUOTA_FETCH = 1,
} kb_quota_kind;

/* Records bytes for (user, client_id) and returns the throttle time in ms
 * (0 when no quota applies or the rate is within it). */
int64_t kb_quotas_record(kb_quotas *q, kb_quota_kind kind, const char *user,
                         const char *client_id, int64_t bytes, int64_t now_ms);

/* The most bytes one response may carry under the quota that applies, as
 * Kafka's getMaxValueInQuotaWindow: quota x (samples - 1) x window;
 * INT64_MAX when no quota applies. */
int64_t kb_quotas_window_bytes(const kb_quotas *q, kb_quota_kind kind, const char *user,
                               const char *client_id);

#endif
