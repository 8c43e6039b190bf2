/*
 * kb_console_guard: who may use the web console, and which requests may
 * write.
 *
 * Job: authenticate with HTTP Basic when the broker has SASL users (SCRAM
 * credentials in the store, or PLAIN users in a SASL listener's JAAS
 * config), checking the password against the SCRAM store as a SCRAM
 * exchange would (the stored key of Hi(password, salt, i)) or the PLAIN
 * list; and guard every write against cross-site requests:
 *   - writes are refused (403) unless runnel.console.write.enable=true;
 *   - a write is a POST carrying X-Runnel-Csrf equal to this process's
 *     random token (the page reads it from GET /api/session, which a page
 *     of another origin cannot read);
 *   - Origin, when sent, must name the Host; Sec-Fetch-Site, when sent,
 *     must be same-origin (or none);
 *   - Host must be the listener's own address, localhost or a loopback
 *     address with its port (against DNS rebinding), on every request.
 *
 * Invariants:
 *   1. The token is 32 random bytes (64 hex digits), made at start, never
 *      sent except in the /api/session answer.
 *   2. Passwords and tokens are compared in constant time.
 *   3. A verified password is remembered (as a SHA-256 digest of user and
 *      password) for KB_GUARD_CACHE_MS, in at most KB_GUARD_CACHE entries,
 *      so PBKDF2 runs on the loop only when a user logs in.
 *
 * Ownership: the guard owns its PLAIN user list; the SCRAM store is the
 * broker's (borrowed).
 * Threading: loop thread only.
 */
#ifndef KB_CONSOLE_GUARD_H
#define KB_CONSOLE_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_context.h"
#include "kb_sasl.h"

#define KB_GUARD_TOKEN_HEX 64
#define KB_GUARD_CACHE     16
#define KB_GUARD_CACHE_MS  (10 * 60 * 1000)
#define KB_GUARD_USER_MAX  256

typedef struct kb_guard_cached {
    uint8_t digest[32];
    char principal[KB_GUARD_USER_MAX + 6];
    int64_t expires_ms; /* monotonic; 0 = free */
} kb_guard_cached;

typedef struct kb_console_guard {
    kb_broker *b;
    char token[KB_GUARD_TOKEN_HEX + 1];
    char host[256];   /* the listener's host as configured */
    uint16_t port;    /* the bound port */
    bool write_enable;
    kb_sasl_user *plain; /* every SASL listener's PLAIN users */
    size_t nplain;
    kb_guard_cached cache[KB_GUARD_CACHE];
} kb_console_guard;

/* What the guard reads of a request (NULL for a header not sent). */
typedef struct kb_guard_view {
    const char *method;
    const char *host;
    const char *origin;
    const char *sec_fetch_site;
    const char *csrf;          /* X-Runnel-Csrf */
    const char *authorization;
    bool write;                /* the route changes state */
} kb_guard_view;

kp_err kb_console_guard_init(kb_console_guard *g, kb_broker *b, const char *host, uint16_t port,
                             bool write_enable, char *err, size_t errlen);
void kb_console_guard_fini(kb_console_guard *g);

/* Whether the broker has SASL users, so the console asks for one. */
bool kb_console_guard_needs_login(const kb_console_guard *g);

/* 0 when the request may go on (principal filled with "User:<name>", or
 * empty without users), else the HTTP status to answer (400 bad Host, 401
 * log in, 403 refused) with *why set. */
int kb_console_guard_check(kb_console_guard *g, const kb_guard_view *v, int64_t now_ms,
                           char *principal, size_t cap, const char **why);

#endif
