/*
 * kb_properties: raw configuration text, before it has any meaning.
 *
 * Job: read Java Properties text (the syntax of Kafka's server.properties)
 * into key/value pairs, and turn environment variable names in the Kafka
 * container images' convention into keys. kb_config merges and types them.
 *
 * Properties syntax, as java.util.Properties.load reads it:
 *   - lines end in \n, \r or \r\n; a line ending in an odd number of
 *     backslashes continues on the next one, whose leading blanks are dropped;
 *   - a line whose first non-blank character is '#' or '!' is a comment
 *     (a comment never continues); blank lines are skipped;
 *   - the key runs to the first unescaped '=', ':', space, tab or form feed;
 *     then blanks, at most one '=' or ':', and blanks again are skipped; the
 *     rest of the line is the value (trailing blanks kept);
 *   - escapes in keys and values: \t \n \r \f, \uXXXX (written out as UTF-8;
 *     a surrogate pair as one code point, a lone surrogate as U+FFFD), and a
 *     backslash before any other character stands for that character.
 *   Bytes are passed through as they are (Java reads ISO-8859-1; a UTF-8 file
 *   thus keeps its UTF-8).
 *
 * Invariants:
 *   1. The callback gets non-empty keys; keys and values are NUL-terminated
 *      and contain no NUL byte.
 *   2. Pairs come in file order; a key may come more than once (the caller
 *      lets the last one win, as Java does).
 *   3. kb_properties_env_key() writes at most n + 1 bytes, lowercase, no '_' run
 *      longer than one character left from the name.
 *
 * Ownership: the key and value given to the callback live only during the
 * call; copy what you keep. Nothing else is allocated past a call.
 *
 * Threading: no shared state; any thread.
 *
 * Errors: kb_properties_parse() returns KP_ERR__INVAL for a malformed \u escape,
 * \u0000, a NUL byte or a line with a value but no key, filling *perr with
 * the line number and a static description; KP_ERR__NOMEM; or the first
 * error the callback returns, which stops the parse.
 */
#ifndef KB_PROPERTIES_H
#define KB_PROPERTIES_H

#include <stddef.h>

#include "kp_err.h"

/* Called once per property; `line` is where its logical line starts. */
typedef kp_err (*kb_properties_fn)(void *arg, const char *key, const char *value, int line);

typedef struct kb_properties_error {
    int pe_line;         /* 1-based line of the fault */
    const char *pe_what; /* e.g. "malformed \\uxxxx escape" (static) */
} kb_properties_error;

kp_err kb_properties_parse(const char *text, size_t len, kb_properties_fn fn, void *arg,
                      kb_properties_error *perr);

/*
 * The key an environment variable stands for. var is its name (n bytes, no
 * '=value'). Returns 0 if it is no broker setting: no KAFKA_ prefix, or one of
 * the JVM / launcher variables (KAFKA_HEAP_OPTS, KAFKA_OPTS, KAFKA_JMX_*,
 * KAFKA_LOG4J_*, KAFKA_DEBUG, KAFKA_GC_LOG_OPTS, KAFKA_VERSION, ...).
 * Otherwise strips KAFKA_ (or bitnami's KAFKA_CFG_), lowercases, and turns
 * each run of underscores into one '-' per three, then '_' for two left or
 * '.' for one left (`___` -> `-`, `__` -> `_`, `_` -> `.`), writes the key
 * to out (capacity n + 1) and returns its length:
 * KAFKA_LOG_DIRS -> log.dirs, KAFKA_LISTENER_NAME_X___Y -> listener.name.x-y.
 */
size_t kb_properties_env_key(const char *var, size_t n, char *out);

#endif
