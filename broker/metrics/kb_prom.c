/* kb_prom: see kb_prom.h. */
#include "kb_prom.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

bool kb_prom_name_ok(const char *name)
{
    if (name[0] == '\0' || (name[0] >= '0' && name[0] <= '9')) {
        return false;
    }
    for (const char *p = name; *p != '\0'; p++) {
        bool ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                  (*p >= '0' && *p <= '9') || *p == '_' || *p == ':';
        if (!ok) {
            return false;
        }
    }
    return true;
}

bool kb_prom_put(kb_prom_out *o, const char *data, size_t len)
{
    if (o->ok && len > 0) {
        o->ok = o->sink(o->arg, data, len);
    }
    return o->ok;
}

static bool put_str(kb_prom_out *o, const char *s)
{
    return kb_prom_put(o, s, strlen(s));
}

/* Writes s escaped: '\' and newline always, '"' when quoted. */
static bool put_escaped(kb_prom_out *o, const char *s, bool quoted)
{
    const char *run = s;
    for (const char *p = s;; p++) {
        const char *esc = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n"
                          : (*p == '"' && quoted) ? "\\\"" : NULL;
        if (esc == NULL && *p != '\0') {
            continue;
        }
        kb_prom_put(o, run, (size_t)(p - run));
        if (*p == '\0') {
            return o->ok;
        }
        put_str(o, esc);
        run = p + 1;
    }
}

bool kb_prom_family_head(kb_prom_out *o, const char *name, const char *help, const char *type)
{
    put_str(o, "# HELP ");
    put_str(o, name);
    put_str(o, " ");
    put_escaped(o, help, false);
    put_str(o, "\n# TYPE ");
    put_str(o, name);
    put_str(o, " ");
    put_str(o, type);
    return put_str(o, "\n");
}

bool kb_prom_labels(kb_prom_out *o, size_t n, const char *const *names,
                    const char *const *values)
{
    for (size_t i = 0; i < n; i++) {
        put_str(o, i == 0 ? "{" : ",");
        put_str(o, names[i]);
        put_str(o, "=\"");
        put_escaped(o, values[i], true);
        put_str(o, "\"");
    }
    return n > 0 ? put_str(o, "}") : o->ok;
}

typedef struct buf_sink {
    char *out;
    size_t cap, len;
} buf_sink;

static bool to_buf(void *arg, const char *data, size_t len)
{
    buf_sink *b = arg;
    if (b->len < b->cap) {
        size_t n = len < b->cap - b->len ? len : b->cap - b->len;
        memcpy(b->out + b->len, data, n);
    }
    b->len += len;
    return true;
}

size_t kb_prom_escape_label(const char *value, char *out, size_t cap)
{
    buf_sink b = {out, cap, 0};
    kb_prom_out o = {to_buf, &b, true};
    put_escaped(&o, value, true);
    if (cap > 0) {
        out[b.len < cap ? b.len : cap - 1] = '\0';
    }
    return b.len;
}

void kb_prom_format_value(double v, char *out, size_t cap)
{
    if (isnan(v)) {
        snprintf(out, cap, "NaN");
    } else if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "+Inf" : "-Inf");
    } else if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        snprintf(out, cap, "%.0f", v);
    } else {
        snprintf(out, cap, "%.17g", v);
    }
}

bool kb_prom_sample(kb_prom_out *o, const char *name, const char *suffix, const char *labels,
                    double value)
{
    char num[40];
    kb_prom_format_value(value, num, sizeof num);
    put_str(o, name);
    put_str(o, suffix);
    put_str(o, labels);
    put_str(o, " ");
    put_str(o, num);
    return put_str(o, "\n");
}
