/*
 * kb_features: Kafka's feature flags (KIP-584): the level ranges Runnel
 * supports for each feature and, on a single node, the levels finalized
 * for the cluster, which UpdateFeatures changes.
 *
 * Job: state what this broker supports (ApiVersions' supported features,
 * BrokerRegistration's ranges), hold and persist the finalized levels of a
 * single node, and validate an UpdateFeatures request as Kafka 4.4's
 * controller does (all updates or none; the first refusal's text). In
 * cluster mode the controller finalizes levels (FeatureLevelRecords in the
 * metadata image) and this store's finalized levels are not used.
 *
 * On disk (first entry of log.dirs): runnel-features.properties, a line
 * `epoch=<n>` and one `<feature>=<level>` line per feature; written to a
 * temp file, fsynced, renamed. A missing file means Kafka 4.4.0's defaults
 * for a newly formatted cluster.
 *
 * Invariants:
 *   1. Every finalized level lies within its feature's supported range.
 *   2. The epoch grows by one with every update applied, so clients that
 *      cache finalized features (ApiVersions' FinalizedFeaturesEpoch) see
 *      the change.
 *   3. The file is written before kb_features_update() returns success.
 *
 * Ownership: kb_features_open() allocates; kb_features_close() frees.
 * Threading: loop thread only.
 */
#ifndef KB_FEATURES_H
#define KB_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_msgbuf.h"
#include "kp_err.h"
#include "kp_types.h"

typedef struct kb_feature_range {
    const char *name;
    int16_t min, max;
    int16_t initial; /* finalized in a newly formatted single node */
} kb_feature_range;

/* The features Runnel knows, i-th (NULL past the end). */
const kb_feature_range *kb_feature_at(int i);

typedef struct kb_features kb_features;

kp_err kb_features_open(const char *dir, kb_features **out);
void kb_features_close(kb_features *f);

/* The finalized level of feature name (0 for a feature not known). */
int16_t kb_features_level(const kb_features *f, const char *name);
int64_t kb_features_epoch(const kb_features *f);

/* UpdateFeatures' upgrade types (v0 has none: an upgrade). */
enum {
    KB_FEATURE_UPGRADE = 1,
    KB_FEATURE_SAFE_DOWNGRADE = 2,
    KB_FEATURE_UNSAFE_DOWNGRADE = 3,
};

typedef struct kb_feature_update {
    kp_str name;
    int16_t level;
    int8_t type;
} kb_feature_update;

/*
 * Checks the n updates in order, each against the levels the ones before it
 * left; on the first refusal returns KP_ERR_INVALID_UPDATE_VERSION with the
 * text Kafka's controller gives in *msg (node_id names the refusing node)
 * and changes nothing. Otherwise, unless validate_only, applies them (a
 * later update of the same feature wins) and persists the levels:
 * KP_ERR_KAFKA_STORAGE_ERROR if the file cannot be written.
 */
kp_err kb_features_update(kb_features *f, const kb_feature_update *u, int32_t n,
                          bool validate_only, int32_t node_id, kb_msgbuf *msg);

#endif
