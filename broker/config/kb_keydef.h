/*
 * kb_keydef: the one way a configuration key is defined, for every scope
 * (broker keys in kb_config.c, topic keys in kb_topic_conf.c), and the one
 * checker of a value against its definition.
 *
 * Job: a key's name, Kafka's type, default, range or choices and flags;
 * finding a key in a scope's table; checking a value with Kafka's own
 * texts ("Invalid value x for configuration k: Not a number of type INT",
 * "Value must be at least 1", "String must be one of: ..."); describing
 * what a key expects in the start-up error line ("expected an integer
 * >= 1"); the DescribeConfigs wire type.
 *
 * Invariants:
 *   1. Each scope's table is sorted by name (kb_keydef_find bisects it).
 *   2. lo <= hi for numbers; choices is "a|b|c" for ENUM and for a LIST
 *      whose items are restricted (NULL otherwise); matched ignoring case
 *      unless KB_KD_EXACT_CASE.
 *
 * Ownership: tables and their strings are static. Threading: any.
 * Errors: kb_keydef_check returns KP_ERR_INVALID_CONFIG with the message.
 */
#ifndef KB_KEYDEF_H
#define KB_KEYDEF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_msgbuf.h"
#include "kp_types.h"

typedef enum kb_key_type {
    KB_KT_INT,
    KB_KT_LONG,
    KB_KT_SHORT,
    KB_KT_BOOL,
    KB_KT_DOUBLE,
    KB_KT_STRING,
    KB_KT_LIST,
    KB_KT_ENUM, /* a string out of choices */
} kb_key_type;

enum kb_key_flags {
    KB_KD_IGNORED = 1u << 0,    /* accepted, no effect on a single node */
    KB_KD_DERIVED = 1u << 1,    /* parsed and checked, then resolved with its synonyms */
    KB_KD_ANY_NUMBER = 1u << 2, /* a DOUBLE without a range */
    KB_KD_EXACT_CASE = 1u << 3, /* choices matched case-sensitively (Kafka's ValidString) */
    KB_KD_DYNAMIC = 1u << 4,    /* changeable at run time (IncrementalAlterConfigs, kb_dynconf) */
    KB_KD_PER_BROKER = 1u << 5, /* dynamic for one broker only, never as the cluster default */
    KB_KD_CLUSTER = 1u << 6,    /* with KB_KD_IGNORED: used in cluster mode (kb_cluster.h) */
};

#define KB_KD_NO_FIELD SIZE_MAX

typedef struct kb_keydef {
    const char *name;
    kb_key_type type;
    const char *def;     /* default as text; NULL = null (no value) */
    int64_t lo, hi;      /* range of INT, LONG, SHORT, DOUBLE */
    const char *choices; /* ENUM, restricted LIST: "a|b|c" */
    unsigned flags;      /* KB_KD_* */
    size_t field;        /* offset of the typed field in the scope's struct, or KB_KD_NO_FIELD */
} kb_keydef;

const kb_keydef *kb_keydef_find(const kb_keydef *table, size_t n, const char *name);

/* Kafka's check of a value (surrounding blanks ignored) with Kafka's text;
 * NULL values are the caller's to refuse. */
kp_err kb_keydef_check(const kb_keydef *kd, const char *value, kb_msgbuf *msg);
/* "expected an integer >= 1" and the like, for the start-up error line. */
void kb_keydef_expected(const kb_keydef *kd, char *buf, size_t cap);
/* Kafka's DescribeConfigs ConfigType of the key. */
int8_t kb_keydef_wire_type(const kb_keydef *kd);

/* Index of s (n bytes) in "a|b|c", ignoring case; -1 if absent. */
int kb_keydef_choice_index(const char *choices, const char *s, size_t n);
/* The idx-th choice of "a|b|c" (its length in *len). */
const char *kb_keydef_choice_at(const char *choices, int idx, size_t *len);
/* A decimal integer filling all of s (no blanks, no overflow). */
bool kb_keydef_parse_integer(const char *s, int64_t *out);

#endif
