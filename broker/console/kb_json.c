#include "kb_json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void kb_json_init(kb_json *j, size_t max)
{
    memset(j, 0, sizeof(*j));
    j->max = max;
    j->first[0] = true;
}

void kb_json_fini(kb_json *j)
{
    free(j->buf);
    j->buf = NULL;
}

char *kb_json_take(kb_json *j, size_t *len)
{
    if (j->err != KP_ERR_NONE || j->buf == NULL) {
        kb_json_fini(j);
        return NULL;
    }
    char *out = j->buf;
    *len = j->len;
    j->buf = NULL;
    return out;
}

static bool reserve(kb_json *j, size_t n)
{
    if (j->err != KP_ERR_NONE)
        return false;
    if (n > j->max || j->len + n + 1 > j->max) {
        j->err = KP_ERR__NOMEM;
        return false;
    }
    if (j->len + n + 1 <= j->cap)
        return true;
    size_t cap = j->cap ? j->cap : 1024;
    while (cap < j->len + n + 1)
        cap *= 2;
    if (cap > j->max)
        cap = j->max;
    char *p = realloc(j->buf, cap);
    if (p == NULL) {
        j->err = KP_ERR__NOMEM;
        return false;
    }
    j->buf = p;
    j->cap = cap;
    return true;
}

static void put(kb_json *j, const char *s, size_t n)
{
    if (!reserve(j, n))
        return;
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}

/* The comma before a value or key, unless it is the first at its level. */
static void sep(kb_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (!j->first[j->depth])
        put(j, ",", 1);
    j->first[j->depth] = false;
}

static void open_level(kb_json *j, char c)
{
    sep(j);
    if (j->depth + 1 >= KB_JSON_DEPTH) {
        j->err = KP_ERR__NOMEM;
        return;
    }
    put(j, &c, 1);
    j->first[++j->depth] = true;
}

static void close_level(kb_json *j, char c)
{
    if (j->depth > 0)
        j->depth--;
    put(j, &c, 1);
}

void kb_json_obj(kb_json *j)
{
    open_level(j, '{');
}

void kb_json_obj_end(kb_json *j)
{
    close_level(j, '}');
}

void kb_json_arr(kb_json *j)
{
    open_level(j, '[');
}

void kb_json_arr_end(kb_json *j)
{
    close_level(j, ']');
}

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when invalid. */
static size_t utf8_len(const uint8_t *p, size_t n)
{
    uint8_t c = p[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        len = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

bool kb_json_is_text(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x20 && p[i] != '\t' && p[i] != '\n' && p[i] != '\r')
            return false;
        if (p[i] == 0x7F)
            return false;
        size_t l = utf8_len(p + i, n - i);
        if (l == 0)
            return false;
        i += l;
    }
    return true;
}

static void put_escaped(kb_json *j, const uint8_t *p, size_t n)
{
    put(j, "\"", 1);
    for (size_t i = 0; i < n && j->err == KP_ERR_NONE;) {
        uint8_t c = p[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            put(j, esc, 2);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            put(j, esc, 6);
            i++;
        } else {
            size_t l = utf8_len(p + i, n - i);
            if (l == 0) {
                put(j, "\\ufffd", 6); /* invalid UTF-8: the replacement character */
                i++;
            } else {
                put(j, (const char *)p + i, l);
                i += l;
            }
        }
    }
    put(j, "\"", 1);
}

void kb_json_key(kb_json *j, const char *key)
{
    sep(j);
    put_escaped(j, (const uint8_t *)key, strlen(key));
    put(j, ":", 1);
    j->after_key = true;
}

void kb_json_strn(kb_json *j, const uint8_t *p, size_t n)
{
    sep(j);
    put_escaped(j, p, n);
}

void kb_json_str(kb_json *j, const char *s)
{
    if (s == NULL) {
        kb_json_null(j);
        return;
    }
    kb_json_strn(j, (const uint8_t *)s, strlen(s));
}

void kb_json_int(kb_json *j, int64_t v)
{
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRId64, v);
    sep(j);
    put(j, num, (size_t)n);
}

void kb_json_bool(kb_json *j, bool v)
{
    sep(j);
    put(j, v ? "true" : "false", v ? 4 : 5);
}

void kb_json_null(kb_json *j)
{
    sep(j);
    put(j, "null", 4);
}

void kb_json_b64(kb_json *j, const uint8_t *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    sep(j);
    if (!reserve(j, 2 + (n + 2) / 3 * 4))
        return;
    char *o = j->buf + j->len;
    *o++ = '"';
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)p[i + 1] << 8;
        if (i + 2 < n)
            v |= p[i + 2];
        *o++ = tab[(v >> 18) & 63];
        *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *o++ = '"';
    j->len = (size_t)(o - j->buf);
    j->buf[j->len] = '\0';
}

void kb_json_kstr(kb_json *j, const char *key, const char *s)
{
    kb_json_key(j, key);
    kb_json_str(j, s);
}

void kb_json_kint(kb_json *j, const char *key, int64_t v)
{
    kb_json_key(j, key);
    kb_json_int(j, v);
}

void kb_json_kbool(kb_json *j, const char *key, bool v)
{
    kb_json_key(j, key);
    kb_json_bool(j, v);
}
