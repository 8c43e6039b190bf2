/*
 * kb_meta_props: meta.properties, the identity file of a KRaft log dir, as
 * Kafka writes it (version=1: cluster.id, node.id, directory.id), read,
 * checked and written for cluster mode.
 *
 * Invariants:
 *   1. A dir formatted by Kafka's storage tool is read as it is (comments,
 *      any key order, keys Runnel does not use kept out of the way).
 *   2. Checks are Kafka's: every dir has the file, version 1, one cluster id
 *      and the configured node id; the first mismatch refuses the start with
 *      one line naming both values.
 * Ownership: plain structs, no allocation.
 * Threading: start-up (and `runnel format`) on the main thread.
 * Errors: KP_ERR__NOENT (no file), KP_ERR__INVAL (a bad or mismatching
 * file), KP_ERR__IO; the line is in err.
 */
#ifndef KB_META_PROPS_H
#define KB_META_PROPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kp_types.h"

typedef struct kb_meta_props {
    char cluster_id[64];
    int32_t node_id;      /* -1: absent */
    kp_uuid directory_id; /* zero: absent */
    int32_t version;      /* -1: absent */
} kb_meta_props;

kp_err kb_meta_props_read(const char *dir, kb_meta_props *out, char *err, size_t errlen);
kp_err kb_meta_props_write(const char *dir, const kb_meta_props *p, char *err, size_t errlen);

/* The log dirs of cfg and its metadata.log.dir, each once, in that order;
 * returns the count (at most max). */
size_t kb_meta_props_dirs(const kb_config *cfg, const char **out, size_t max);

/* Cluster mode's start-up check of every dir: formatted, version 1, one
 * cluster id (and cluster.id's if set), node.id. *cluster receives the id,
 * dir_ids[i] each dir's directory id (as many as kb_meta_props_dirs). */
kp_err kb_meta_props_check_all(const kb_config *cfg, kb_meta_props *cluster, kp_uuid *dir_ids,
                               size_t max, char *err, size_t errlen);

/* `runnel format -t ID -c server.properties`: writes meta.properties in every
 * dir that lacks one (with a fresh directory id); a dir already formatted
 * with another cluster id fails, as Kafka's tool does without
 * --ignore-formatted. */
kp_err kb_meta_props_format(const kb_config *cfg, const char *cluster_id, char *err,
                            size_t errlen);

#endif
