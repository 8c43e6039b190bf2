#include "kb_console_guard.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kb_config.h"
#include "kb_scram.h"
#include "kb_scram_store.h"

static kp_err add_plain_users(kb_console_guard *g, const kb_sasl_listener *sl)
{
    for (size_t i = 0; i < sl->sl_nusers; i++) {
        kb_sasl_user *v = realloc(g->plain, (g->nplain + 1) * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        g->plain = v;
        v[g->nplain].su_name = strdup(sl->sl_users[i].su_name);
        v[g->nplain].su_password = strdup(sl->sl_users[i].su_password);
        g->nplain++;
        if (v[g->nplain - 1].su_name == NULL || v[g->nplain - 1].su_password == NULL)
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static kp_err load_plain_users(kb_console_guard *g, char *err, size_t errlen)
{
    const kb_config *cfg = g->b->cfg;
    for (size_t i = 0; i < cfg->listeners.n; i++) {
        const kb_listener *l = &cfg->listeners.v[i];
        if (l->li_protocol != KB_SEC_SASL_PLAINTEXT && l->li_protocol != KB_SEC_SASL_SSL)
            continue;
        kb_sasl_listener *sl;
        kp_err e = kb_sasl_listener_new(cfg, l, &sl, err, errlen);
        if (e != KP_ERR_NONE)
            return e;
        e = add_plain_users(g, sl);
        kb_sasl_listener_free(sl);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}

kp_err kb_console_guard_init(kb_console_guard *g, kb_broker *b, const char *host, uint16_t port,
                             bool write_enable, char *err, size_t errlen)
{
    memset(g, 0, sizeof(*g));
    g->b = b;
    g->port = port;
    g->write_enable = write_enable;
    snprintf(g->host, sizeof(g->host), "%s", host);
    uint8_t raw[KB_GUARD_TOKEN_HEX / 2];
    if (RAND_bytes(raw, (int)sizeof(raw)) != 1) {
        snprintf(err, errlen, "cannot make the console's CSRF token");
        return KP_ERR__IO;
    }
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(g->token + 2 * i, 3, "%02x", raw[i]);
    return load_plain_users(g, err, errlen);
}

void kb_console_guard_fini(kb_console_guard *g)
{
    kb_sasl_users_free(g->plain, g->nplain);
    g->plain = NULL;
    g->nplain = 0;
    OPENSSL_cleanse(g->cache, sizeof(g->cache));
}

bool kb_console_guard_needs_login(const kb_console_guard *g)
{
    return g->nplain > 0 || (g->b->scram != NULL && kb_scram_store_count(g->b->scram) > 0);
}

/* Host is "<name>:<port>" for the listener's port, name being the
 * listener's host, localhost or a loopback address; any name when the
 * listener is bound to every interface. */
static bool host_ok(const kb_console_guard *g, const char *host)
{
    if (host == NULL)
        return false;
    const char *colon = strrchr(host, ':');
    if (colon == NULL || colon == host || (host[0] == '[' && colon[-1] != ']'))
        return false;
    char port[8];
    snprintf(port, sizeof(port), "%u", g->port);
    if (strcmp(colon + 1, port) != 0)
        return false;
    size_t n = (size_t)(colon - host);
    if (g->host[0] == '\0' || strcmp(g->host, "0.0.0.0") == 0 || strcmp(g->host, "::") == 0)
        return true;
    static const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
        if (strlen(loopback[i]) == n && strncasecmp(host, loopback[i], n) == 0)
            return true;
    return strlen(g->host) == n && strncasecmp(host, g->host, n) == 0;
}

/* Origin, when sent, is this very site: http(s)://<Host>. */
static bool origin_ok(const char *origin, const char *host)
{
    if (origin == NULL)
        return true;
    const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                             : NULL;
    return rest != NULL && strcasecmp(rest, host) == 0;
}

static bool token_ok(const kb_console_guard *g, const char *csrf)
{
    return csrf != NULL && strlen(csrf) == KB_GUARD_TOKEN_HEX &&
           CRYPTO_memcmp(csrf, g->token, KB_GUARD_TOKEN_HEX) == 0;
}

static int write_check(const kb_console_guard *g, const kb_guard_view *v, const char **why)
{
    if (strcmp(v->method, "POST") != 0) {
        *why = "writes must be POST";
        return 405;
    }
    if (!g->write_enable) {
        *why = "the console is read-only (runnel.console.write.enable=false)";
        return 403;
    }
    if (!origin_ok(v->origin, v->host) ||
        (v->sec_fetch_site != NULL && strcmp(v->sec_fetch_site, "same-origin") != 0 &&
         strcmp(v->sec_fetch_site, "none") != 0)) {
        *why = "cross-origin write refused";
        return 403;
    }
    if (!token_ok(g, v->csrf)) {
        *why = "missing or wrong X-Runnel-Csrf token";
        return 403;
    }
    return 0;
}

static bool scram_ok(const kb_scram_store *st, const char *user, size_t ulen, const char *pw)
{
    static const kb_scram_mech mechs[] = {KB_SCRAM_SHA_256, KB_SCRAM_SHA_512};
    for (size_t i = 0; st != NULL && i < sizeof(mechs) / sizeof(mechs[0]); i++) {
        const kb_scram_cred *c = kb_scram_store_find(st, user, ulen, mechs[i]);
        kb_scram_cred mine;
        if (c == NULL || kb_scram_cred_from_password(mechs[i], pw, c->sc_salt, c->sc_salt_len,
                                                     c->sc_iterations, &mine) != KP_ERR_NONE)
            continue;
        if (CRYPTO_memcmp(mine.sc_stored_key, c->sc_stored_key, kb_scram_hash_len(mechs[i])) == 0)
            return true;
    }
    return false;
}

static bool plain_ok(const kb_console_guard *g, const char *user, const char *pw)
{
    uint8_t want[32], got[32];
    SHA256((const uint8_t *)pw, strlen(pw), got);
    for (size_t i = 0; i < g->nplain; i++) {
        if (strcmp(g->plain[i].su_name, user) != 0)
            continue;
        const char *p = g->plain[i].su_password;
        SHA256((const uint8_t *)p, strlen(p), want);
        if (CRYPTO_memcmp(want, got, sizeof(got)) == 0)
            return true;
    }
    return false;
}

static kb_guard_cached *cache_find(kb_console_guard *g, const uint8_t digest[32], int64_t now)
{
    for (size_t i = 0; i < KB_GUARD_CACHE; i++)
        if (g->cache[i].expires_ms > now && CRYPTO_memcmp(g->cache[i].digest, digest, 32) == 0)
            return &g->cache[i];
    return NULL;
}

static void cache_put(kb_console_guard *g, const uint8_t digest[32], const char *user, int64_t now)
{
    kb_guard_cached *slot = &g->cache[0];
    for (size_t i = 0; i < KB_GUARD_CACHE; i++)
        if (g->cache[i].expires_ms < slot->expires_ms)
            slot = &g->cache[i];
    memcpy(slot->digest, digest, 32);
    snprintf(slot->principal, sizeof(slot->principal), "User:%.*s", KB_GUARD_USER_MAX, user);
    slot->expires_ms = now + KB_GUARD_CACHE_MS;
}

/* "Basic base64(user:password)" checked; principal filled. */
static bool basic_ok(kb_console_guard *g, const char *auth, int64_t now, char *principal, size_t cap)
{
    if (auth == NULL || strncasecmp(auth, "Basic ", 6) != 0)
        return false;
    char dec[2 * KB_GUARD_USER_MAX + 2];
    size_t n;
    const char *b64 = auth + 6;
    if (!kb_b64_decode(b64, strlen(b64), (uint8_t *)dec, sizeof(dec) - 1, &n))
        return false;
    dec[n] = '\0';
    char *colon = memchr(dec, ':', n);
    if (colon == NULL || colon == dec || memchr(dec, '\0', n) != NULL || colon - dec > KB_GUARD_USER_MAX)
        return false;
    *colon = '\0';
    uint8_t digest[32];
    SHA256((const uint8_t *)dec, n, digest); /* user NUL password */
    kb_guard_cached *hit = cache_find(g, digest, now);
    bool ok = hit != NULL || plain_ok(g, dec, colon + 1) ||
              scram_ok(g->b->scram, dec, (size_t)(colon - dec), colon + 1);
    if (ok && hit == NULL)
        cache_put(g, digest, dec, now);
    if (ok)
        snprintf(principal, cap, "User:%.*s", KB_GUARD_USER_MAX, dec);
    OPENSSL_cleanse(dec, sizeof(dec));
    return ok;
}

int kb_console_guard_check(kb_console_guard *g, const kb_guard_view *v, int64_t now_ms,
                           char *principal, size_t cap, const char **why)
{
    principal[0] = '\0';
    if (!host_ok(g, v->host)) {
        *why = "unexpected Host header";
        return 400;
    }
    if (kb_console_guard_needs_login(g) && !basic_ok(g, v->authorization, now_ms, principal, cap)) {
        *why = "log in with a SASL user of this broker";
        return 401;
    }
    return v->write ? write_check(g, v, why) : 0;
}
