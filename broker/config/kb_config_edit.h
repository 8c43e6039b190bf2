/*
 * kb_config_edit: a set of explicitly set configs (key=value) and the edits the
 * admin APIs make to it: AlterConfigs' full replacement and
 * IncrementalAlterConfigs' SET, DELETE, APPEND and SUBTRACT.
 *
 * Job: pure logic, shared by topic configs and dynamic broker configs, so
 * the handlers only look up resources, validate values and persist.
 *
 * Invariants:
 *   1. A kb_cfgset's entries are sorted by key and keys are unique.
 *   2. Every entry owns its key and value (never NULL).
 *   3. An edit that fails leaves the set as it was (the caller works on a
 *      copy made with kb_cfgset_copy() and swaps it in on success).
 *   4. List values are comma-separated without spaces; APPEND never adds an
 *      item twice and SUBTRACT removes every copy of an item.
 *
 * Ownership: the set owns its entries; kb_cfgset_fini() frees them.
 * kb_cfgset_get() returns a pointer valid until the next edit.
 * Threading: any thread; no shared state.
 * Errors: KP_ERR__NOMEM; KP_ERR_INVALID_CONFIG / KP_ERR_INVALID_REQUEST with
 * Kafka's message in msg for an operation the key does not allow.
 */
#ifndef KB_CONFIG_EDIT_H
#define KB_CONFIG_EDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_msgbuf.h"
#include "kp_types.h"

/* One explicitly set config: key=value, both owned (never NULL). Topic,
 * broker and group configs all keep their sets of these. */
typedef struct kb_topic_config {
    char *key;
    char *value;
} kb_topic_config;

/* IncrementalAlterConfigs' ConfigOperation values. */
enum kb_cfg_op {
    KB_CFG_OP_SET = 0,
    KB_CFG_OP_DELETE = 1,
    KB_CFG_OP_APPEND = 2,
    KB_CFG_OP_SUBTRACT = 3,
};

typedef struct kb_cfgset {
    size_t n;
    kb_topic_config *v;
} kb_cfgset;

void kb_cfgset_fini(kb_cfgset *s);
/* Copies n entries (any order, unique keys) into an empty set. */
kp_err kb_cfgset_copy(kb_cfgset *dst, const kb_topic_config *v, size_t n);
const char *kb_cfgset_get(const kb_cfgset *s, const char *key);
/* Sets key=value, replacing any value (value NULL deletes the key). */
kp_err kb_cfgset_put(kb_cfgset *s, const char *key, const char *value);

/*
 * One incremental operation on key. For APPEND and SUBTRACT, is_list says
 * whether the key takes a list (otherwise INVALID_CONFIG, as Kafka), and
 * base is the value to start from when the key is not set (the key's
 * default; NULL = empty).
 */
kp_err kb_cfgset_apply(kb_cfgset *s, const char *key, int8_t op, const char *value, bool is_list,
                       const char *base, kb_msgbuf *msg);

/* True when the same key appears twice among n names (Kafka refuses the
 * request with INVALID_REQUEST); *dup names it. */
bool kb_cfg_has_duplicate(const kp_str *names, size_t stride, int32_t n, kp_str *dup);

#endif
