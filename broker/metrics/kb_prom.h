/*
 * kb_prom: the Prometheus text exposition format, version 0.0.4.
 *
 * Job: write the pieces of a scrape answer: a family's `# HELP` and
 * `# TYPE` lines, label sets with their values escaped, and sample values
 * (integers exactly, floats round-trip, +Inf/-Inf/NaN as Prometheus spells
 * them), into a caller's sink.
 *
 * Invariants:
 *   1. Label values are escaped as the format says: '\' -> "\\",
 *      '"' -> "\"", newline -> "\n"; HELP text escapes '\' and newline.
 *      Any other byte passes through (the format is UTF-8).
 *   2. A metric name or label name written is matched by
 *      [a-zA-Z_:][a-zA-Z0-9_:]*; kb_prom_name_ok() tells.
 *
 * Ownership: nothing allocated; output goes to the sink as it is made.
 *
 * Threading: any.
 *
 * Errors: the sink returns false to stop (out of room); every writer
 * returns what the sink last returned.
 */
#ifndef KB_PROM_H
#define KB_PROM_H

#include <stdbool.h>
#include <stddef.h>

/* Takes len bytes of output; false stops the writing. */
typedef bool kb_prom_sink(void *arg, const char *data, size_t len);

typedef struct kb_prom_out {
    kb_prom_sink *sink;
    void *arg;
    bool ok; /* false once the sink refused */
} kb_prom_out;

bool kb_prom_name_ok(const char *name);
bool kb_prom_put(kb_prom_out *o, const char *data, size_t len);
/* "# HELP name help\n# TYPE name type\n" */
bool kb_prom_family_head(kb_prom_out *o, const char *name, const char *help, const char *type);
/* Writes `{n1="v1",n2="v2"}` (nothing for n == 0), values escaped. */
bool kb_prom_labels(kb_prom_out *o, size_t n, const char *const *names,
                    const char *const *values);
/* Escapes a label value into out (NUL-terminated); returns the length it
 * needs (like snprintf): a result >= cap means out was cut. */
size_t kb_prom_escape_label(const char *value, char *out, size_t cap);
/* Formats a sample value into out (at least 32 bytes). */
void kb_prom_format_value(double v, char *out, size_t cap);
/* "name<labels> value\n", labels already formatted (may be ""). */
bool kb_prom_sample(kb_prom_out *o, const char *name, const char *suffix, const char *labels,
                    double value);

#endif
