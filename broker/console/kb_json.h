/*
 * kb_json: a small JSON writer into a bounded, growing buffer, for the web
 * console's API answers.
 *
 * Job: emit objects, arrays, keys, strings (escaped; any bytes, invalid
 * UTF-8 replaced), numbers, booleans and null, placing the commas itself.
 *
 * Invariants:
 *   1. The buffer never grows past max bytes: a write that would pass it
 *      sets the sticky error (KP_ERR__NOMEM) and the output is dropped.
 *   2. Nesting is at most KB_JSON_DEPTH; deeper is the same sticky error.
 *   3. The text is NUL-terminated whenever err is KP_ERR_NONE.
 *
 * Ownership: the writer owns buf until kb_json_take() hands it over (the
 * caller free()s it) or kb_json_fini() frees it.
 * Threading: no shared state.
 */
#ifndef KB_JSON_H
#define KB_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_types.h"

#define KB_JSON_DEPTH 32

typedef struct kb_json {
    char *buf;
    size_t len, cap, max;
    kp_err err;
    int depth;
    bool first[KB_JSON_DEPTH]; /* no value written yet at this level */
    bool after_key;            /* the next value follows a key: no comma */
} kb_json;

void kb_json_init(kb_json *j, size_t max);
void kb_json_fini(kb_json *j);
/* The text (NUL-terminated, *len bytes), now the caller's; NULL on error. */
char *kb_json_take(kb_json *j, size_t *len);

void kb_json_obj(kb_json *j);
void kb_json_obj_end(kb_json *j);
void kb_json_arr(kb_json *j);
void kb_json_arr_end(kb_json *j);
void kb_json_key(kb_json *j, const char *key);
void kb_json_str(kb_json *j, const char *s);
void kb_json_strn(kb_json *j, const uint8_t *p, size_t n);
void kb_json_int(kb_json *j, int64_t v);
void kb_json_bool(kb_json *j, bool v);
void kb_json_null(kb_json *j);
/* p[0..n) as base64 in a string. */
void kb_json_b64(kb_json *j, const uint8_t *p, size_t n);

/* key plus value in one call. */
void kb_json_kstr(kb_json *j, const char *key, const char *s);
void kb_json_kint(kb_json *j, const char *key, int64_t v);
void kb_json_kbool(kb_json *j, const char *key, bool v);

/* Whether p[0..n) is valid UTF-8 without control characters other than
 * tab, newline and carriage return (the console shows it as text). */
bool kb_json_is_text(const uint8_t *p, size_t n);

#endif
