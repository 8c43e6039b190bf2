#include "kb_keydef.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int keydef_cmp(const void *name, const void *kd)
{
    return strcmp(name, ((const kb_keydef *)kd)->name);
}

const kb_keydef *kb_keydef_find(const kb_keydef *table, size_t n, const char *name)
{
    return bsearch(name, table, n, sizeof(*table), keydef_cmp);
}

int kb_keydef_choice_index(const char *choices, const char *s, size_t n)
{
    int idx = 0;

    for (const char *c = choices; c != NULL && *c != '\0'; idx++) {
        size_t len = strcspn(c, "|");
        if (len == n && strncasecmp(c, s, n) == 0)
            return idx;
        c += len + (c[len] == '|');
    }
    return -1;
}

const char *kb_keydef_choice_at(const char *choices, int idx, size_t *len)
{
    const char *c = choices;

    for (int i = 0; i < idx && *c != '\0'; i++) {
        c += strcspn(c, "|");
        c += *c == '|';
    }
    *len = strcspn(c, "|");
    return c;
}

bool kb_keydef_parse_integer(const char *s, int64_t *out)
{
    char *end;

    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || *s == ' ' || *s == '\t')
        return false;
    *out = v;
    return true;
}

/* kb_keydef_choice_index, honouring KB_KD_EXACT_CASE. */
static bool is_choice(const kb_keydef *kd, const char *s, size_t n)
{
    int idx = kb_keydef_choice_index(kd->choices, s, n);
    if (idx < 0 || !(kd->flags & KB_KD_EXACT_CASE))
        return idx >= 0;
    size_t len;
    return strncmp(kb_keydef_choice_at(kd->choices, idx, &len), s, n) == 0;
}

/* "a, b, c" from "a|b|c". */
static void list_choices(const char *choices, char *buf, size_t cap)
{
    size_t o = 0;

    for (const char *c = choices; c != NULL && *c != '\0' && o + 8 < cap; c++)
        o += (size_t)snprintf(buf + o, cap - o, *c == '|' ? ", " : "%c", *c);
    buf[o] = '\0';
}

static int64_t type_top(kb_key_type t)
{
    return t == KB_KT_INT ? INT32_MAX : t == KB_KT_SHORT ? INT16_MAX : INT64_MAX;
}

void kb_keydef_expected(const kb_keydef *kd, char *buf, size_t cap)
{
    char list[256];

    list_choices(kd->choices, list, sizeof list);
    switch (kd->type) {
    case KB_KT_INT:
    case KB_KT_LONG:
    case KB_KT_SHORT:
        if (kd->hi == type_top(kd->type))
            snprintf(buf, cap, "expected an integer >= %lld", (long long)kd->lo);
        else
            snprintf(buf, cap, "expected an integer between %lld and %lld", (long long)kd->lo,
                     (long long)kd->hi);
        break;
    case KB_KT_BOOL:
        snprintf(buf, cap, "expected true or false");
        break;
    case KB_KT_DOUBLE:
        if (kd->flags & KB_KD_ANY_NUMBER)
            snprintf(buf, cap, "expected a number");
        else
            snprintf(buf, cap, "expected a number between %lld and %lld", (long long)kd->lo,
                     (long long)kd->hi);
        break;
    case KB_KT_ENUM:
        snprintf(buf, cap, "expected one of %s", list);
        break;
    case KB_KT_LIST:
        snprintf(buf, cap, "expected a comma-separated list%s%s without empty items",
                 list[0] ? " of " : "", list);
        break;
    case KB_KT_STRING:
        snprintf(buf, cap, "expected a string");
        break;
    }
}

static const char *type_name(kb_key_type t)
{
    return t == KB_KT_INT     ? "INT"
           : t == KB_KT_SHORT ? "SHORT"
           : t == KB_KT_LONG  ? "LONG"
                              : "DOUBLE";
}

static kp_err invalid(kb_msgbuf *msg, const kb_keydef *kd, const char *value, const char *why)
{
    kb_msgf(msg, "Invalid value %s for configuration %s: %s", value, kd->name, why);
    return KP_ERR_INVALID_CONFIG;
}

static kp_err check_number(const kb_keydef *kd, const char *value, const char *t, bool fits,
                           kb_msgbuf *msg)
{
    char why[96];
    if (kd->type == KB_KT_DOUBLE) {
        char *end;
        double d = fits ? strtod(t, &end) : 0;
        if (!fits || end == t || *end != '\0' || isnan(d)) {
            snprintf(why, sizeof why, "Not a number of type %s", type_name(kd->type));
            return invalid(msg, kd, value, why);
        }
        if (!(kd->flags & KB_KD_ANY_NUMBER) && (d < (double)kd->lo || d > (double)kd->hi)) {
            snprintf(why, sizeof why, "Value must be %s %lld", d < (double)kd->lo ? "at least"
                     : "no more than", (long long)(d < (double)kd->lo ? kd->lo : kd->hi));
            return invalid(msg, kd, value, why);
        }
        return KP_ERR_NONE;
    }
    int64_t top = type_top(kd->type), v;
    if (!fits || !kb_keydef_parse_integer(t, &v) || v > top || v < -top - 1) {
        snprintf(why, sizeof why, "Not a number of type %s", type_name(kd->type));
        return invalid(msg, kd, value, why);
    }
    if (v < kd->lo || v > kd->hi) {
        snprintf(why, sizeof why, "Value must be %s %lld", v < kd->lo ? "at least" : "no more than",
                 (long long)(v < kd->lo ? kd->lo : kd->hi));
        return invalid(msg, kd, value, why);
    }
    return KP_ERR_NONE;
}

/* Every item of a restricted list must be one of the choices. */
static kp_err check_list(const kb_keydef *kd, const char *value, kb_msgbuf *msg)
{
    if (kd->choices == NULL)
        return KP_ERR_NONE;
    for (const char *s = value; *s != '\0';) {
        size_t len = strcspn(s, ",");
        const char *item = s;
        size_t n = len;
        while (n > 0 && (*item == ' ' || *item == '\t'))
            item++, n--;
        while (n > 0 && (item[n - 1] == ' ' || item[n - 1] == '\t'))
            n--;
        if (n > 0 && !is_choice(kd, item, n)) {
            char list[256], why[320];
            list_choices(kd->choices, list, sizeof list);
            snprintf(why, sizeof why, "String must be one of: %s", list);
            return invalid(msg, kd, value, why);
        }
        s += len + (s[len] == ',');
    }
    return KP_ERR_NONE;
}

kp_err kb_keydef_check(const kb_keydef *kd, const char *value, kb_msgbuf *msg)
{
    const char *s = value;
    size_t n = strlen(value);
    while (n > 0 && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    char t[64];
    snprintf(t, sizeof t, "%.*s", (int)n, s);
    bool fits = n < sizeof t;
    switch (kd->type) {
    case KB_KT_INT:
    case KB_KT_SHORT:
    case KB_KT_LONG:
    case KB_KT_DOUBLE:
        return check_number(kd, value, t, fits, msg);
    case KB_KT_BOOL:
        if (strcasecmp(t, "true") == 0 || strcasecmp(t, "false") == 0)
            return KP_ERR_NONE;
        return invalid(msg, kd, value, "Expected value to be either true or false");
    case KB_KT_ENUM:
        if (fits && is_choice(kd, t, n))
            return KP_ERR_NONE;
        char list[256], why[320];
        list_choices(kd->choices, list, sizeof list);
        snprintf(why, sizeof why, "String must be one of: %s", list);
        return invalid(msg, kd, value, why);
    case KB_KT_LIST:
        return check_list(kd, value, msg);
    case KB_KT_STRING:
        break;
    }
    return KP_ERR_NONE;
}

int8_t kb_keydef_wire_type(const kb_keydef *kd)
{
    static const int8_t wire[] = {[KB_KT_INT] = 3,    [KB_KT_LONG] = 5,   [KB_KT_SHORT] = 4,
                                  [KB_KT_BOOL] = 1,   [KB_KT_DOUBLE] = 6, [KB_KT_STRING] = 2,
                                  [KB_KT_LIST] = 7,   [KB_KT_ENUM] = 2};
    return wire[kd->type];
}
