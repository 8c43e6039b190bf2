#include "kb_acl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct acl_entry {
    kb_acl_binding b; /* strings point into mem */
    char *mem;
} acl_entry;

struct kb_acl_store {
    char *dir; /* NULL: memory only */
    acl_entry *v;
    size_t n, cap;
    char **super_users;
    size_t nsuper;
    bool allow_everyone;
};

/* ---- names ---------------------------------------------------------------- */

static const char *name_at(const char *const *names, size_t n, int8_t code)
{
    return code >= 0 && (size_t)code < n ? names[code] : "UNKNOWN";
}

const char *kb_acl_res_name(int8_t code)
{
    static const char *const n[] = {"UNKNOWN", "ANY",   "TOPIC", "GROUP",
                                    "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"};
    return name_at(n, sizeof n / sizeof n[0], code);
}

const char *kb_acl_op_name(int8_t code)
{
    static const char *const n[] = {"UNKNOWN",        "ANY",           "ALL",
                                    "READ",           "WRITE",         "CREATE",
                                    "DELETE",         "ALTER",         "DESCRIBE",
                                    "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                                    "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
                                    "TWO_PHASE_COMMIT"};
    return name_at(n, sizeof n / sizeof n[0], code);
}

const char *kb_acl_pattern_name(int8_t code)
{
    static const char *const n[] = {"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"};
    return name_at(n, sizeof n / sizeof n[0], code);
}

const char *kb_acl_perm_name(int8_t code)
{
    static const char *const n[] = {"UNKNOWN", "ANY", "DENY", "ALLOW"};
    return name_at(n, sizeof n / sizeof n[0], code);
}

/* ---- string helpers --------------------------------------------------------- */

static bool str_eq(kp_str a, kp_str b)
{
    return a.len == b.len && (a.len <= 0 || memcmp(a.p, b.p, (size_t)a.len) == 0);
}

static bool str_is(kp_str a, const char *s)
{
    size_t n = strlen(s);
    return a.len >= 0 && (size_t)a.len == n && memcmp(a.p, s, n) == 0;
}

static bool str_prefix(kp_str prefix, kp_str s)
{
    return prefix.len >= 0 && s.len >= prefix.len &&
           (prefix.len == 0 || memcmp(prefix.p, s.p, (size_t)prefix.len) == 0);
}

static kp_str cstr(const char *s)
{
    return (kp_str){s, (int32_t)strlen(s)};
}

/* ---- checks and filters ----------------------------------------------------- */

kp_err kb_acl_check_new(const kb_acl_binding *b, kb_msgbuf *msg)
{
    if (b->ab_res_type == KB_RES_CLUSTER && !str_is(b->ab_name, KB_ACL_CLUSTER_NAME)) {
        kb_msgf(msg, "The only valid name for the CLUSTER resource is " KB_ACL_CLUSTER_NAME);
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_name.len <= 0) {
        kb_msgf(msg, "Invalid empty resource name");
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_res_type <= KB_RES_ANY || b->ab_res_type > KB_RES_USER) {
        kb_msgf(msg, "Invalid resourceType %s", kb_acl_res_name(b->ab_res_type));
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_pattern != KB_PAT_LITERAL && b->ab_pattern != KB_PAT_PREFIXED) {
        kb_msgf(msg, "Invalid patternType %s", kb_acl_pattern_name(b->ab_pattern));
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_op <= KB_OP_ANY || b->ab_op > KB_OP_TWO_PHASE_COMMIT) {
        kb_msgf(msg, "Invalid operation %s", kb_acl_op_name(b->ab_op));
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_perm != KB_PERM_ALLOW && b->ab_perm != KB_PERM_DENY) {
        kb_msgf(msg, "Invalid permissionType %s", kb_acl_perm_name(b->ab_perm));
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_principal.len < 0 || b->ab_host.len < 0) {
        kb_msgf(msg, "Invalid null principal or host");
        return KP_ERR_INVALID_REQUEST;
    }
    if (b->ab_principal.len == 0 ||
        memchr(b->ab_principal.p, ':', (size_t)b->ab_principal.len) == NULL) {
        kb_msgf(msg,
                "Could not parse principal from `%.*s` (no colon is present separating the "
                "principal type from the principal name)",
                b->ab_principal.len > 120 ? 120 : b->ab_principal.len,
                b->ab_principal.len > 0 ? b->ab_principal.p : "");
        return KP_ERR_INVALID_REQUEST;
    }
    return KP_ERR_NONE;
}

bool kb_acl_codes_known(const kb_acl_binding *b)
{
    return b->ab_res_type != KB_RES_UNKNOWN && b->ab_pattern != KB_PAT_UNKNOWN &&
           b->ab_op != KB_OP_UNKNOWN && b->ab_perm != KB_PERM_UNKNOWN;
}

bool kb_acl_buildable(const kb_acl_binding *b)
{
    return b->ab_res_type != KB_RES_ANY && b->ab_pattern != KB_PAT_ANY &&
           b->ab_pattern != KB_PAT_MATCH && b->ab_op != KB_OP_ANY && b->ab_perm != KB_PERM_ANY;
}

kp_err kb_acl_check_filter(const kb_acl_binding *f, kb_msgbuf *msg)
{
    if (f->ab_res_type <= KB_RES_UNKNOWN || f->ab_res_type > KB_RES_USER ||
        f->ab_pattern <= KB_PAT_UNKNOWN || f->ab_pattern > KB_PAT_PREFIXED) {
        kb_msgf(msg, "Unknown patternFilter.");
        return KP_ERR_INVALID_REQUEST;
    }
    if (f->ab_op <= KB_OP_UNKNOWN || f->ab_op > KB_OP_TWO_PHASE_COMMIT ||
        f->ab_perm <= KB_PERM_UNKNOWN || f->ab_perm > KB_PERM_ALLOW) {
        kb_msgf(msg, "Unknown entryFilter.");
        return KP_ERR_INVALID_REQUEST;
    }
    return KP_ERR_NONE;
}

/* Kafka's ResourcePatternFilter.matches. */
static bool pattern_filter_matches(const kb_acl_binding *f, const kb_acl_binding *b)
{
    if (f->ab_res_type != KB_RES_ANY && f->ab_res_type != b->ab_res_type)
        return false;
    if (f->ab_pattern != KB_PAT_ANY && f->ab_pattern != KB_PAT_MATCH &&
        f->ab_pattern != b->ab_pattern)
        return false;
    if (f->ab_name.len < 0)
        return true;
    if (f->ab_pattern == KB_PAT_ANY || f->ab_pattern == b->ab_pattern)
        return str_eq(f->ab_name, b->ab_name);
    if (b->ab_pattern == KB_PAT_LITERAL)
        return str_eq(f->ab_name, b->ab_name) || str_is(b->ab_name, "*");
    return b->ab_pattern == KB_PAT_PREFIXED && str_prefix(b->ab_name, f->ab_name);
}

bool kb_acl_filter_matches(const kb_acl_binding *f, const kb_acl_binding *b)
{
    return pattern_filter_matches(f, b) &&
           (f->ab_principal.len < 0 || str_eq(f->ab_principal, b->ab_principal)) &&
           (f->ab_host.len < 0 || str_eq(f->ab_host, b->ab_host)) &&
           (f->ab_op == KB_OP_ANY || f->ab_op == b->ab_op) &&
           (f->ab_perm == KB_PERM_ANY || f->ab_perm == b->ab_perm);
}

/* ---- the store ---------------------------------------------------------------- */

static bool binding_eq(const kb_acl_binding *a, const kb_acl_binding *b)
{
    return a->ab_res_type == b->ab_res_type && a->ab_pattern == b->ab_pattern &&
           a->ab_op == b->ab_op && a->ab_perm == b->ab_perm && str_eq(a->ab_name, b->ab_name) &&
           str_eq(a->ab_principal, b->ab_principal) && str_eq(a->ab_host, b->ab_host);
}

/* Copies s to *dst and advances it; returns the view of the copy. */
static kp_str copy_into(char **dst, kp_str s)
{
    kp_str out = {*dst, s.len};
    if (s.len > 0)
        memcpy(*dst, s.p, (size_t)s.len);
    (*dst)[s.len] = '\0';
    *dst += s.len + 1;
    return out;
}

kp_err kb_acl_add(kb_acl_store *st, const kb_acl_binding *b)
{
    if (b->ab_name.len < 0 || b->ab_principal.len < 0 || b->ab_host.len < 0 ||
        b->ab_name.len > KB_ACL_STR_MAX || b->ab_principal.len > KB_ACL_STR_MAX ||
        b->ab_host.len > KB_ACL_STR_MAX)
        return KP_ERR_INVALID_REQUEST;
    for (size_t i = 0; i < st->n; i++)
        if (binding_eq(&st->v[i].b, b))
            return KP_ERR_NONE;
    if (st->n >= KB_ACL_MAX)
        return KP_ERR_POLICY_VIOLATION;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        acl_entry *v = realloc(st->v, cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        st->v = v;
        st->cap = cap;
    }
    size_t len = (size_t)b->ab_name.len + (size_t)b->ab_principal.len + (size_t)b->ab_host.len + 3;
    char *mem = malloc(len);
    if (mem == NULL)
        return KP_ERR__NOMEM;
    acl_entry *e = &st->v[st->n++];
    e->mem = mem;
    e->b = *b;
    e->b.ab_name = copy_into(&mem, b->ab_name);
    e->b.ab_principal = copy_into(&mem, b->ab_principal);
    e->b.ab_host = copy_into(&mem, b->ab_host);
    return KP_ERR_NONE;
}

size_t kb_acl_delete(kb_acl_store *st, const kb_acl_binding *f,
                     void (*each)(void *arg, const kb_acl_binding *b), void *arg)
{
    size_t kept = 0, removed = 0;
    for (size_t i = 0; i < st->n; i++) {
        if (kb_acl_filter_matches(f, &st->v[i].b)) {
            if (each != NULL)
                each(arg, &st->v[i].b);
            free(st->v[i].mem);
            removed++;
        } else {
            st->v[kept++] = st->v[i];
        }
    }
    st->n = kept;
    return removed;
}

size_t kb_acl_count(const kb_acl_store *st)
{
    return st->n;
}

void kb_acl_at(const kb_acl_store *st, size_t i, kb_acl_binding *out)
{
    *out = st->v[i].b;
}

void kb_acl_free(kb_acl_store *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->n; i++)
        free(st->v[i].mem);
    for (size_t i = 0; i < st->nsuper; i++)
        free(st->super_users[i]);
    free(st->super_users);
    free(st->v);
    free(st->dir);
    free(st);
}

/* ---- decisions ------------------------------------------------------------------ */

static bool is_super(const kb_acl_store *st, const char *principal)
{
    for (size_t i = 0; i < st->nsuper; i++)
        if (strcmp(st->super_users[i], principal) == 0)
            return true;
    return false;
}

/* Whether the binding's pattern covers the literal resource name. */
static bool pattern_applies(const kb_acl_binding *b, kp_str name)
{
    if (b->ab_pattern == KB_PAT_LITERAL)
        return str_eq(b->ab_name, name) || str_is(b->ab_name, "*");
    return b->ab_pattern == KB_PAT_PREFIXED && str_prefix(b->ab_name, name);
}

static bool entry_for(const kb_acl_binding *b, const char *principal, const char *host)
{
    return (str_is(b->ab_principal, principal) || str_is(b->ab_principal, "User:*")) &&
           (str_is(b->ab_host, "*") || str_is(b->ab_host, host));
}

/* Whether an ALLOW binding's operation grants op (with the implied ones). */
static bool allow_grants(int8_t acl_op, int8_t op)
{
    if (acl_op == KB_OP_ALL || acl_op == op)
        return true;
    if (op == KB_OP_DESCRIBE)
        return acl_op == KB_OP_READ || acl_op == KB_OP_WRITE || acl_op == KB_OP_DELETE ||
               acl_op == KB_OP_ALTER;
    return op == KB_OP_DESCRIBE_CONFIGS && acl_op == KB_OP_ALTER_CONFIGS;
}

bool kb_acl_authorize(const kb_acl_store *st, const char *principal, const char *host, int8_t op,
                      int8_t res_type, kp_str name)
{
    if (is_super(st, principal))
        return true;
    bool any = false, allowed = false;
    for (size_t i = 0; i < st->n; i++) {
        const kb_acl_binding *b = &st->v[i].b;
        if (b->ab_res_type != res_type || !pattern_applies(b, name))
            continue;
        any = true;
        if (!entry_for(b, principal, host))
            continue;
        if (b->ab_perm == KB_PERM_DENY && (b->ab_op == KB_OP_ALL || b->ab_op == op))
            return false;
        if (b->ab_perm == KB_PERM_ALLOW && allow_grants(b->ab_op, op))
            allowed = true;
    }
    return allowed || (!any && st->allow_everyone);
}

/* A DENY for (principal, host, op) whose pattern covers every name the
 * ALLOW binding a could cover. */
static bool deny_dominates(const kb_acl_store *st, const kb_acl_binding *a, const char *principal,
                           const char *host, int8_t op)
{
    for (size_t i = 0; i < st->n; i++) {
        const kb_acl_binding *d = &st->v[i].b;
        if (d->ab_perm != KB_PERM_DENY || d->ab_res_type != a->ab_res_type ||
            !entry_for(d, principal, host) || (d->ab_op != op && d->ab_op != KB_OP_ALL))
            continue;
        if (d->ab_pattern == KB_PAT_LITERAL && a->ab_pattern == KB_PAT_LITERAL &&
            str_eq(d->ab_name, a->ab_name))
            return true;
        if (d->ab_pattern == KB_PAT_PREFIXED && str_prefix(d->ab_name, a->ab_name))
            return true;
    }
    return false;
}

bool kb_acl_authorize_any(const kb_acl_store *st, const char *principal, const char *host,
                          int8_t op, int8_t res_type)
{
    /* As Kafka: a made-up name first, so super users (and the no-ACL
     * default) are honoured whatever the DENY bindings say. */
    if (kb_acl_authorize(st, principal, host, op, res_type, cstr("hardcode")))
        return true;
    bool wildcard_allow = false;
    for (size_t i = 0; i < st->n; i++) {
        const kb_acl_binding *b = &st->v[i].b;
        if (b->ab_res_type != res_type || !entry_for(b, principal, host) ||
            (b->ab_op != op && b->ab_op != KB_OP_ALL))
            continue;
        if (b->ab_perm == KB_PERM_DENY && b->ab_pattern == KB_PAT_LITERAL &&
            str_is(b->ab_name, "*"))
            return false;
        if (b->ab_perm == KB_PERM_ALLOW && b->ab_pattern == KB_PAT_LITERAL &&
            str_is(b->ab_name, "*"))
            wildcard_allow = true;
    }
    if (wildcard_allow)
        return true;
    for (size_t i = 0; i < st->n; i++) {
        const kb_acl_binding *b = &st->v[i].b;
        if (b->ab_perm == KB_PERM_ALLOW && b->ab_res_type == res_type &&
            entry_for(b, principal, host) && (b->ab_op == op || b->ab_op == KB_OP_ALL) &&
            !deny_dominates(st, b, principal, host, op))
            return true;
    }
    return false;
}

/* ---- the file --------------------------------------------------------------------- */

static void put_field(FILE *f, kp_str s)
{
    fputc(' ', f);
    for (int32_t i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if (c < '!' || c > '~' || c == '%')
            fprintf(f, "%%%02X", c);
        else
            fputc(c, f);
    }
}

static void emit(void *arg, FILE *f)
{
    const kb_acl_store *st = arg;
    fprintf(f, "# runnel ACLs, version 1\n");
    for (size_t i = 0; i < st->n; i++) {
        const kb_acl_binding *b = &st->v[i].b;
        fprintf(f, "acl %d %d %d %d", b->ab_res_type, b->ab_pattern, b->ab_op, b->ab_perm);
        put_field(f, b->ab_name);
        put_field(f, b->ab_principal);
        put_field(f, b->ab_host);
        fputc('\n', f);
    }
}

kp_err kb_acl_save(const kb_acl_store *st)
{
    if (st->dir == NULL)
        return KP_ERR_NONE;
    return kb_file_write_stream(st->dir, KB_ACL_FILE, emit, (void *)(uintptr_t)st);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Undoes put_field in place; false on a malformed escape. */
static bool take_field(char *tok, kp_str *out)
{
    char *o = tok;
    for (char *p = tok; *p; p++) {
        if (*p != '%') {
            *o++ = *p;
            continue;
        }
        int hi = hexval(p[1]), lo = hi >= 0 ? hexval(p[2]) : -1;
        if (lo < 0)
            return false;
        *o++ = (char)(hi * 16 + lo);
        p += 2;
    }
    *out = (kp_str){tok, (int32_t)(o - tok)};
    return out->len <= KB_ACL_STR_MAX;
}

static bool take_code(const char *tok, int8_t *out)
{
    char *end;
    long v = strtol(tok, &end, 10);
    if (end == tok || *end != '\0' || v < 0 || v > 127)
        return false;
    *out = (int8_t)v;
    return true;
}

static kp_err load_line(void *arg, char *line)
{
    kb_acl_store *st = arg;
    if (line[0] == '#' || line[0] == '\0')
        return KP_ERR_NONE;
    char *tok[9], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(line, " ", &save); t != NULL && n < 9; t = strtok_r(NULL, " ", &save))
        tok[n++] = t;
    kb_acl_binding b;
    kb_msgbuf msg;
    if (n != 8 || strcmp(tok[0], "acl") != 0 || !take_code(tok[1], &b.ab_res_type) ||
        !take_code(tok[2], &b.ab_pattern) || !take_code(tok[3], &b.ab_op) ||
        !take_code(tok[4], &b.ab_perm) || !take_field(tok[5], &b.ab_name) ||
        !take_field(tok[6], &b.ab_principal) || !take_field(tok[7], &b.ab_host) ||
        kb_acl_check_new(&b, &msg) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    kp_err e = kb_acl_add(st, &b);
    return e == KP_ERR_POLICY_VIOLATION ? KP_ERR__CORRUPT : e;
}

/* super.users: principals separated by ';', blanks around each ignored. */
static kp_err parse_super_users(kb_acl_store *st, const char *list)
{
    const char *p = list;
    while (p != NULL && *p != '\0') {
        const char *semi = strchr(p, ';');
        size_t len = semi != NULL ? (size_t)(semi - p) : strlen(p);
        const char *s = p;
        while (len > 0 && (*s == ' ' || *s == '\t')) {
            s++;
            len--;
        }
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
            len--;
        if (len > 0) {
            char **v = realloc(st->super_users, (st->nsuper + 1) * sizeof(*v));
            if (v == NULL)
                return KP_ERR__NOMEM;
            st->super_users = v;
            if ((v[st->nsuper] = strndup(s, len)) == NULL)
                return KP_ERR__NOMEM;
            st->nsuper++;
        }
        p = semi != NULL ? semi + 1 : NULL;
    }
    return KP_ERR_NONE;
}

kp_err kb_acl_new(const char *dir, const char *super_users, bool allow_everyone,
                  kb_acl_store **out)
{
    *out = NULL;
    kb_acl_store *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return KP_ERR__NOMEM;
    st->allow_everyone = allow_everyone;
    kp_err e = parse_super_users(st, super_users);
    if (e == KP_ERR_NONE && dir != NULL)
        e = (st->dir = strdup(dir)) == NULL ? KP_ERR__NOMEM
                                            : kb_file_read_lines(dir, KB_ACL_FILE, load_line, st);
    if (e != KP_ERR_NONE) {
        kb_acl_free(st);
        return e;
    }
    *out = st;
    return KP_ERR_NONE;
}

static const char *const authorizer_classes[] = {
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
};

kp_err kb_acl_open(const kb_config *cfg, const char *dir, kb_acl_store **out, char *err,
                   size_t errlen)
{
    *out = NULL;
    const char *cls = kb_config_get_raw(cfg, "authorizer.class.name");
    if (cls == NULL || cls[0] == '\0')
        return KP_ERR_NONE;
    bool known = false;
    for (size_t i = 0; i < sizeof authorizer_classes / sizeof authorizer_classes[0]; i++)
        known = known || strcmp(cls, authorizer_classes[i]) == 0;
    if (!known) {
        char esc[256];
        kb_log_escape(esc, sizeof esc, cls, strlen(cls));
        snprintf(err, errlen,
                 "config: authorizer.class.name=%s: unsupported authorizer (supported: "
                 "org.apache.kafka.metadata.authorizer.StandardAuthorizer)",
                 esc);
        return KP_ERR__INVAL;
    }
    const char *everyone = kb_config_get_raw(cfg, "allow.everyone.if.no.acl.found");
    kp_err e = kb_acl_new(dir, kb_config_get_raw(cfg, "super.users"),
                          everyone != NULL && strcasecmp(everyone, "true") == 0, out);
    if (e == KP_ERR__CORRUPT || e == KP_ERR__IO)
        snprintf(err, errlen, "%s/%s: %s", dir, KB_ACL_FILE,
                 e == KP_ERR__CORRUPT ? "malformed ACL line" : "cannot read");
    else if (e != KP_ERR_NONE)
        snprintf(err, errlen, "out of memory loading the ACLs");
    return e;
}
