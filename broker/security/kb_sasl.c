#include "kb_sasl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "kb_log.h"
#include "kp_msg.h"

#define JAAS_TOKEN_MAX 1024
#define JAAS_USERS_MAX 10000

/* ---- mechanisms and the gate --------------------------------------------- */

static const struct {
    unsigned bit;
    const char *name;
} mech_names[] = {
    {KB_MECH_PLAIN, "PLAIN"},
    {KB_MECH_SCRAM_SHA_256, "SCRAM-SHA-256"},
    {KB_MECH_SCRAM_SHA_512, "SCRAM-SHA-512"},
};

unsigned kb_sasl_mech_from_name(const char *p, size_t len)
{
    for (size_t i = 0; i < sizeof mech_names / sizeof mech_names[0]; i++)
        if (strlen(mech_names[i].name) == len && memcmp(mech_names[i].name, p, len) == 0)
            return mech_names[i].bit;
    return 0;
}

const char *kb_sasl_mech_name(unsigned mech)
{
    for (size_t i = 0; i < sizeof mech_names / sizeof mech_names[0]; i++)
        if (mech_names[i].bit == mech)
            return mech_names[i].name;
    return "?";
}

bool kb_sasl_allows(kb_sasl_phase phase, int16_t api_key)
{
    switch (phase) {
    case KB_SASL_OFF:
    case KB_SASL_DONE:
        return true;
    case KB_SASL_START:
        return api_key == KP_API_API_VERSIONS || api_key == KP_API_SASL_HANDSHAKE;
    case KB_SASL_AUTH:
        return api_key == KP_API_SASL_AUTHENTICATE;
    default:
        return false; /* RAW: tokens never reach the request decoder */
    }
}

int32_t kb_sasl_frame_limit(const kb_sasl_listener *sl, kb_sasl_phase phase, int32_t request_max)
{
    if (sl == NULL || phase == KB_SASL_OFF || phase == KB_SASL_DONE)
        return request_max;
    return sl->sl_max_receive < request_max ? sl->sl_max_receive : request_max;
}

/* ---- PLAIN ------------------------------------------------------------------ */

kp_err kb_sasl_plain_parse(const uint8_t *p, size_t len, kb_sasl_plain *out)
{
    memset(out, 0, sizeof(*out));
    const uint8_t *nul1 = memchr(p, 0, len);
    const uint8_t *nul2 = nul1 ? memchr(nul1 + 1, 0, len - (size_t)(nul1 + 1 - p)) : NULL;
    if (nul2 == NULL || memchr(nul2 + 1, 0, len - (size_t)(nul2 + 1 - p)) != NULL) {
        out->sp_why = "Invalid SASL/PLAIN response: expected 3 tokens";
        return KP_ERR__MALFORMED;
    }
    out->sp_authzid = (const char *)p;
    out->sp_authzid_len = (size_t)(nul1 - p);
    out->sp_user = (const char *)nul1 + 1;
    out->sp_user_len = (size_t)(nul2 - nul1 - 1);
    out->sp_password = (const char *)nul2 + 1;
    out->sp_password_len = len - (size_t)(nul2 + 1 - p);
    if (out->sp_user_len == 0)
        out->sp_why = "Authentication failed: username not specified";
    else if (out->sp_password_len == 0)
        out->sp_why = "Authentication failed: password not specified";
    else if (out->sp_authzid_len != 0 && (out->sp_authzid_len != out->sp_user_len ||
                                          memcmp(out->sp_authzid, out->sp_user, out->sp_user_len)))
        out->sp_why = "Authentication failed: Client requested an authorization id that is "
                      "different from username";
    return out->sp_why == NULL ? KP_ERR_NONE : KP_ERR__MALFORMED;
}

/* ---- JAAS ------------------------------------------------------------------- */

enum jaas_tok { J_END, J_WORD, J_STR, J_EQ, J_SEMI, J_ERR };

/* The next token of a JAAS entry: a word, a quoted string (\" and \\
 * escapes), '=' or ';'. */
static enum jaas_tok jaas_next(const char **pp, char *buf, size_t cap)
{
    const char *p = *pp;
    size_t n = 0;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    enum jaas_tok t = J_WORD;
    if (*p == '\0' || *p == '=' || *p == ';') {
        t = *p == '\0' ? J_END : *p == '=' ? J_EQ : J_SEMI;
        *pp = *p ? p + 1 : p;
        return t;
    }
    if (*p == '"') {
        for (p++; *p != '"'; p++) {
            if (*p == '\\' && p[1] != '\0')
                p++;
            if (*p == '\0' || n + 1 >= cap)
                return J_ERR;
            buf[n++] = *p;
        }
        p++;
        t = J_STR;
    } else {
        for (; *p && !strchr(" \t\r\n=;\"", *p); p++) {
            if (n + 1 >= cap)
                return J_ERR;
            buf[n++] = *p;
        }
    }
    buf[n] = '\0';
    *pp = p;
    return t;
}

static kp_err jaas_add_user(kb_sasl_user **users, size_t *n, const char *name, const char *pw)
{
    if (*n >= JAAS_USERS_MAX)
        return KP_ERR__INVAL;
    kb_sasl_user *u = realloc(*users, (*n + 1) * sizeof(**users));
    if (u == NULL)
        return KP_ERR__NOMEM;
    *users = u;
    u[*n].su_name = strdup(name);
    u[*n].su_password = strdup(pw);
    (*n)++;
    return u[*n - 1].su_name && u[*n - 1].su_password ? KP_ERR_NONE : KP_ERR__NOMEM;
}

static kp_err jaas_options(const char **p, bool plain, kb_sasl_user **users, size_t *n)
{
    char key[JAAS_TOKEN_MAX], val[JAAS_TOKEN_MAX];
    for (;;) {
        enum jaas_tok t = jaas_next(p, key, sizeof key);
        if (t == J_SEMI)
            return jaas_next(p, val, sizeof val) == J_END ? KP_ERR_NONE : KP_ERR__INVAL;
        if (t != J_WORD || jaas_next(p, val, sizeof val) != J_EQ)
            return KP_ERR__INVAL;
        t = jaas_next(p, val, sizeof val);
        if (t != J_WORD && t != J_STR)
            return KP_ERR__INVAL;
        if (plain && strncmp(key, "user_", 5) == 0 && key[5] != '\0') {
            kp_err e = jaas_add_user(users, n, key + 5, val);
            if (e != KP_ERR_NONE)
                return e;
        }
    }
}

void kb_sasl_users_free(kb_sasl_user *users, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(users[i].su_name);
        if (users[i].su_password != NULL) {
            OPENSSL_cleanse(users[i].su_password, strlen(users[i].su_password));
            free(users[i].su_password);
        }
    }
    free(users);
}

kp_err kb_sasl_jaas_users(const char *jaas, kb_sasl_user **users, size_t *n, char *err,
                          size_t errlen)
{
    char cls[JAAS_TOKEN_MAX], flag[JAAS_TOKEN_MAX];
    const char *p = jaas;
    *users = NULL;
    *n = 0;
    kp_err e = KP_ERR__INVAL;
    if (jaas_next(&p, cls, sizeof cls) == J_WORD && jaas_next(&p, flag, sizeof flag) == J_WORD &&
        (!strcmp(flag, "required") || !strcmp(flag, "requisite") || !strcmp(flag, "sufficient") ||
         !strcmp(flag, "optional"))) {
        const char *tail = strrchr(cls, '.');
        bool plain = strcmp(tail ? tail + 1 : cls, "PlainLoginModule") == 0;
        e = jaas_options(&p, plain, users, n);
    }
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "expected `<LoginModule class> required key=\"value\" ... ;`");
        kb_sasl_users_free(*users, *n);
        *users = NULL;
        *n = 0;
    }
    return e;
}

/* ---- listener configuration ----------------------------------------------------- */

static kp_err parse_mechanisms(const char *list, const char *listener, unsigned *mechs, char *err,
                               size_t errlen)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", list);
    *mechs = 0;
    for (char *t = strtok_r(buf, ", ", &save); t != NULL; t = strtok_r(NULL, ", ", &save)) {
        unsigned m = kb_sasl_mech_from_name(t, strlen(t));
        if (m != 0) {
            *mechs |= m;
        } else if (strcmp(t, "GSSAPI") == 0 || strcmp(t, "OAUTHBEARER") == 0) {
            KB_LOG(KB_LL_WARN, KB_SUB_CONFIG,
                   "msg=\"SASL mechanism not supported; skipped\" listener=%s mechanism=%s",
                   listener, t);
        } else {
            snprintf(err, errlen, "config: listener %s: sasl.enabled.mechanisms=%s: unknown "
                     "mechanism %s", listener, list, t);
            return KP_ERR__INVAL;
        }
    }
    return KP_ERR_NONE;
}

static kp_err listener_users(const kb_config *cfg, const kb_listener *l, kb_sasl_listener *sl,
                             char *err, size_t errlen)
{
    const char *key = "plain.sasl.jaas.config";
    const char *jaas = kb_config_listener_value(cfg, l->li_name, key, false);
    if (jaas == NULL) {
        key = "sasl.jaas.config";
        jaas = kb_config_get_raw(cfg, key);
    }
    if (jaas == NULL)
        return KP_ERR_NONE;
    char why[160];
    kp_err e = kb_sasl_jaas_users(jaas, &sl->sl_users, &sl->sl_nusers, why, sizeof why);
    if (e != KP_ERR_NONE)
        snprintf(err, errlen, "config: listener %s: %s: %s", l->li_name, key, why);
    return e;
}

static kp_err listener_max_receive(const kb_config *cfg, const kb_listener *l, int32_t *out,
                                   char *err, size_t errlen)
{
    const char *v =
        kb_config_listener_value(cfg, l->li_name, "sasl.server.max.receive.size", true);
    *out = KB_SASL_MAX_RECEIVE_DEFAULT;
    if (v == NULL)
        return KP_ERR_NONE;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end != '\0' || n < 1 || n > INT32_MAX) {
        snprintf(err, errlen, "config: sasl.server.max.receive.size=%s: expected an integer >= 1",
                 v);
        return KP_ERR__INVAL;
    }
    *out = (int32_t)n;
    return KP_ERR_NONE;
}

kp_err kb_sasl_listener_new(const kb_config *cfg, const kb_listener *l, kb_sasl_listener **out,
                            char *err, size_t errlen)
{
    kb_sasl_listener *sl = calloc(1, sizeof(*sl));
    *out = NULL;
    if (sl == NULL)
        return KP_ERR__NOMEM;
    kp_err e = listener_users(cfg, l, sl, err, errlen);
    if (e == KP_ERR_NONE)
        e = listener_max_receive(cfg, l, &sl->sl_max_receive, err, errlen);
    const char *list = kb_config_listener_value(cfg, l->li_name, "sasl.enabled.mechanisms", true);
    if (e == KP_ERR_NONE && list != NULL)
        e = parse_mechanisms(list, l->li_name, &sl->sl_mechs, err, errlen);
    else if (e == KP_ERR_NONE)
        sl->sl_mechs = KB_MECH_SCRAM_SHA_256 | KB_MECH_SCRAM_SHA_512 |
                       (sl->sl_nusers > 0 ? KB_MECH_PLAIN : 0);
    if (e == KP_ERR_NONE && sl->sl_mechs == 0) {
        snprintf(err, errlen, "config: listener %s: sasl.enabled.mechanisms: no supported "
                 "mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)", l->li_name);
        e = KP_ERR__INVAL;
    }
    if (e == KP_ERR_NONE && (sl->sl_mechs & KB_MECH_PLAIN) && sl->sl_nusers == 0) {
        snprintf(err, errlen, "config: listener %s: PLAIN is enabled but no user is configured "
                 "(listener.name.%s.plain.sasl.jaas.config with user_<name>=\"<password>\")",
                 l->li_name, l->li_name);
        e = KP_ERR__INVAL;
    }
    if (e != KP_ERR_NONE) {
        kb_sasl_listener_free(sl);
        return e;
    }
    *out = sl;
    return KP_ERR_NONE;
}

void kb_sasl_listener_free(kb_sasl_listener *sl)
{
    if (sl == NULL)
        return;
    kb_sasl_users_free(sl->sl_users, sl->sl_nusers);
    free(sl);
}

/* ---- sessions ------------------------------------------------------------------- */

struct kb_sasl_session {
    unsigned mech;
    const kb_sasl_listener *sl;
    kb_scram *scram;
    bool finished; /* succeeded or failed: no further step */
    char user[KB_SCRAM_USER_MAX + 1];
    const char *why;
};

kb_sasl_session *kb_sasl_session_new(unsigned mech, const kb_sasl_listener *sl,
                                     const kb_scram_store *store)
{
    kb_sasl_session *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->mech = mech;
    s->sl = sl;
    s->why = "";
    if (mech == KB_MECH_SCRAM_SHA_256 || mech == KB_MECH_SCRAM_SHA_512) {
        s->scram = kb_scram_new(mech == KB_MECH_SCRAM_SHA_256 ? KB_SCRAM_SHA_256 : KB_SCRAM_SHA_512,
                                store);
        if (s->scram == NULL) {
            free(s);
            return NULL;
        }
    }
    return s;
}

void kb_sasl_session_free(kb_sasl_session *s)
{
    if (s == NULL)
        return;
    kb_scram_free(s->scram);
    free(s);
}

/* SHA-256 of both, then CRYPTO_memcmp: the time does not depend on where
 * the passwords differ, nor on the configured password's length. */
static bool password_matches(const char *want, const char *got, size_t got_len)
{
    uint8_t a[32], b[32];
    unsigned int la = 0, lb = 0;
    if (!EVP_Digest(want, strlen(want), a, &la, EVP_sha256(), NULL) ||
        !EVP_Digest(got, got_len, b, &lb, EVP_sha256(), NULL))
        return false;
    return CRYPTO_memcmp(a, b, sizeof a) == 0;
}

static kb_auth_step plain_step(kb_sasl_session *s, const uint8_t *in, size_t len)
{
    kb_sasl_plain pl;
    if (kb_sasl_plain_parse(in, len, &pl) != KP_ERR_NONE) {
        s->why = pl.sp_why;
        return KB_AUTH_FAILURE;
    }
    snprintf(s->user, sizeof s->user, "%.*s", (int)(pl.sp_user_len < KB_SCRAM_USER_MAX
                                                         ? pl.sp_user_len
                                                         : KB_SCRAM_USER_MAX),
             pl.sp_user);
    const kb_sasl_user *u = NULL;
    for (size_t i = 0; i < s->sl->sl_nusers && u == NULL; i++)
        if (strlen(s->sl->sl_users[i].su_name) == pl.sp_user_len &&
            memcmp(s->sl->sl_users[i].su_name, pl.sp_user, pl.sp_user_len) == 0)
            u = &s->sl->sl_users[i];
    /* An unknown user costs the same digest work as a wrong password. */
    bool ok = password_matches(u ? u->su_password : "", pl.sp_password, pl.sp_password_len);
    if (u == NULL || !ok) {
        s->why = "Authentication failed: Invalid username or password";
        return KB_AUTH_FAILURE;
    }
    return KB_AUTH_SUCCESS;
}

kb_auth_step kb_sasl_session_step(kb_sasl_session *s, const uint8_t *in, size_t len,
                                  const uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (s->finished) {
        s->why = "Authentication failed: unexpected SASL token";
        return KB_AUTH_FAILURE;
    }
    kb_auth_step r;
    if (s->scram != NULL) {
        r = kb_scram_step(s->scram, in, len, out, out_len);
        snprintf(s->user, sizeof s->user, "%s", kb_scram_user(s->scram));
        s->why = kb_scram_why(s->scram);
    } else {
        r = plain_step(s, in, len);
    }
    if (r != KB_AUTH_CONTINUE)
        s->finished = true;
    return r;
}

unsigned kb_sasl_session_mech(const kb_sasl_session *s)
{
    return s->mech;
}

const char *kb_sasl_session_user(const kb_sasl_session *s)
{
    return s->user;
}

const char *kb_sasl_session_why(const kb_sasl_session *s)
{
    return s->why;
}
