#include "kb_properties.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct prop_src {
    const char *p, *end;
    int line;      /* number of the natural line last read */
    char *buf;     /* the logical line being built (malloc'd, freed by the caller) */
    size_t n, cap;
} prop_src;

/* Reads one natural line (without its terminator) into [*s, *s + *n); false at EOF. */
static bool natural_line(prop_src *ps, const char **s, size_t *n)
{
    if (ps->p >= ps->end)
        return false;
    const char *start = ps->p;
    while (ps->p < ps->end && *ps->p != '\n' && *ps->p != '\r')
        ps->p++;
    *s = start;
    *n = (size_t)(ps->p - start);
    if (ps->p < ps->end) {
        char c = *ps->p++;
        if (c == '\r' && ps->p < ps->end && *ps->p == '\n')
            ps->p++;
    }
    ps->line++;
    return true;
}

static void skip_blank(const char **s, size_t *n)
{
    while (*n > 0 && (**s == ' ' || **s == '\t' || **s == '\f')) {
        (*s)++;
        (*n)--;
    }
}

static bool buf_append(prop_src *ps, const char *s, size_t n)
{
    if (ps->n + n + 1 > ps->cap) {
        size_t cap = (ps->n + n + 1) * 2;
        char *b = realloc(ps->buf, cap);
        if (b == NULL)
            return false;
        ps->buf = b;
        ps->cap = cap;
    }
    memcpy(ps->buf + ps->n, s, n);
    ps->n += n;
    ps->buf[ps->n] = '\0';
    return true;
}

/*
 * Builds the next logical line in ps->buf: comment and blank lines skipped, a
 * line ending in an odd number of backslashes joined to the next one with the
 * next one's leading whitespace dropped. Returns 1, 0 at EOF, -1 out of memory.
 */
static int logical_line(prop_src *ps, int *first_line)
{
    const char *s;
    size_t n;

    ps->n = 0;
    for (;;) {
        if (!natural_line(ps, &s, &n))
            return 0;
        skip_blank(&s, &n);
        if (n > 0 && *s != '#' && *s != '!')
            break;
    }
    *first_line = ps->line;
    for (;;) {
        size_t slashes = 0;
        while (slashes < n && s[n - 1 - slashes] == '\\')
            slashes++;
        bool more = (slashes & 1) != 0;
        if (!buf_append(ps, s, more ? n - 1 : n))
            return -1;
        if (!more || !natural_line(ps, &s, &n))
            return 1;
        skip_blank(&s, &n);
    }
}

static int hex_value(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Reads the 4 hex digits of a \u escape at s[0..3]; -1 if malformed. */
static long hex4(const char *s, size_t n)
{
    long v = 0;

    if (n < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        int h = hex_value((unsigned char)s[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(char *out, unsigned long cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/*
 * Decodes \uXXXX at s (after the backslash and 'u'); a surrogate pair
 * written as two escapes becomes one code point, a lone surrogate U+FFFD.
 * Returns the escape bytes consumed after "\u", or 0 if malformed.
 */
static size_t decode_u(const char *s, size_t n, unsigned long *cp)
{
    long hi = hex4(s, n);

    if (hi < 0)
        return 0;
    *cp = (unsigned long)hi;
    if (hi < 0xd800 || hi > 0xdfff)
        return 4;
    *cp = 0xfffd;
    if (hi <= 0xdbff && n >= 10 && s[4] == '\\' && s[5] == 'u') {
        long lo = hex4(s + 6, n - 6);
        if (lo >= 0xdc00 && lo <= 0xdfff) {
            *cp = 0x10000 + (((unsigned long)hi - 0xd800) << 10) + ((unsigned long)lo - 0xdc00);
            return 10;
        }
    }
    return 4;
}

/* Java's loadConvert: \t \n \r \f, \uXXXX (as UTF-8), \x -> x. *out is malloc'd. */
static kp_err unescape(const char *s, size_t n, char **out, const char **what)
{
    char *d = malloc(n + 1); /* no escape decodes to more bytes than it takes */
    size_t o = 0;

    if (d == NULL)
        return KP_ERR__NOMEM;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '\\' && i + 1 < n) {
            c = s[++i];
            if (c == 'u') {
                unsigned long cp = 0;
                size_t used = decode_u(s + i + 1, n - i - 1, &cp);
                if (used == 0 || cp == 0) {
                    *what = used == 0 ? "malformed \\uxxxx escape" : "\\u0000 is not allowed";
                    free(d);
                    return KP_ERR__INVAL;
                }
                o += put_utf8(d + o, cp);
                i += used;
                continue;
            }
            c = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 'f' ? '\f' : c;
        } else if (c == '\\') {
            continue; /* a lone backslash at the very end: dropped, as Java does */
        }
        d[o++] = c;
    }
    d[o] = '\0';
    *out = d;
    return KP_ERR_NONE;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\f';
}

/* Splits a logical line into key and value (Java's rules) and hands them to fn. */
static kp_err parse_property(const prop_src *ps, int line, kb_properties_fn fn, void *arg,
                             const char **what)
{
    const char *l = ps->buf;
    size_t n = ps->n, k = 0, v;
    char *key = NULL, *value = NULL;

    while (k < n && l[k] != '=' && l[k] != ':' && !is_blank(l[k]))
        k += l[k] == '\\' && k + 1 < n ? 2 : 1;
    for (v = k; v < n && is_blank(l[v]); v++)
        ;
    if (v < n && (l[v] == '=' || l[v] == ':'))
        v++;
    while (v < n && is_blank(l[v]))
        v++;
    kp_err rc = unescape(l, k, &key, what);
    if (rc == KP_ERR_NONE)
        rc = unescape(l + v, n - v, &value, what);
    if (rc == KP_ERR_NONE && key[0] == '\0') {
        *what = "a line with a value but no key";
        rc = KP_ERR__INVAL;
    }
    if (rc == KP_ERR_NONE)
        rc = fn(arg, key, value, line);
    free(key);
    free(value);
    return rc;
}

kp_err kb_properties_parse(const char *text, size_t len, kb_properties_fn fn, void *arg,
                      kb_properties_error *perr)
{
    prop_src ps = {.p = text, .end = text + len};
    const char *what = "out of memory";
    kp_err rc = KP_ERR_NONE;
    int line = 0, got;

    const char *nul = memchr(text, '\0', len);
    if (nul != NULL) {
        line = 1;
        for (const char *c = text; c < nul; c++)
            line += *c == '\n';
        what = "NUL byte";
        rc = KP_ERR__INVAL;
    }
    while (rc == KP_ERR_NONE && (got = logical_line(&ps, &line)) != 0)
        rc = got < 0 ? KP_ERR__NOMEM : parse_property(&ps, line, fn, arg, &what);
    free(ps.buf);
    if (rc != KP_ERR_NONE && perr != NULL) {
        perr->pe_line = line;
        perr->pe_what = what;
    }
    return rc;
}

/* KAFKA_* variables that configure the JVM or the launcher, not the broker. */
static const char *const env_skip[] = {
    "KAFKA_HEAP_OPTS",     "KAFKA_OPTS",           "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_LOG4J_OPTS",    "KAFKA_DEBUG",          "KAFKA_GC_LOG_OPTS",
    "KAFKA_JMX_OPTS",      "KAFKA_JMX_PORT",       "KAFKA_JMX_HOSTNAME",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_VERSION",        "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_HOME",          "KAFKA_DEBUG_SUSPEND_FLAG", "KAFKA_TOOLS_LOG4J_LOGLEVEL",
};

static size_t name_to_key(const char *name, size_t n, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < n;) {
        if (name[i] != '_') {
            out[o++] = (char)tolower((unsigned char)name[i++]);
            continue;
        }
        size_t run = 0;
        while (i < n && name[i] == '_') {
            run++;
            i++;
        }
        for (; run >= 3; run -= 3)
            out[o++] = '-';
        if (run == 2)
            out[o++] = '_';
        else if (run == 1)
            out[o++] = '.';
    }
    out[o] = '\0';
    return o;
}

static bool env_skipped(const char *name, size_t n)
{
    for (size_t i = 0; i < sizeof env_skip / sizeof env_skip[0]; i++) {
        if (strlen(env_skip[i]) == n && memcmp(env_skip[i], name, n) == 0)
            return true;
    }
    return false;
}


size_t kb_properties_env_key(const char *var, size_t n, char *out)
{
    if (n <= 6 || memcmp(var, "KAFKA_", 6) != 0 || env_skipped(var, n))
        return 0;
    size_t skip = n > 10 && memcmp(var, "KAFKA_CFG_", 10) == 0 ? 10 : 6;
    return name_to_key(var + skip, n - skip, out);
}
