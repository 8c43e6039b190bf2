/*
 * kb_config_load: what the two halves of the configuration loader share.
 * Private to kb_config.c (files, environment, overrides, typed keys, topic
 * defaults) and kb_config_listeners.c (listeners, advertised listeners and
 * the security protocol map); nothing else includes it.
 *
 * A load_ctx lives for one kb_config_load call. Every string and array the
 * loader makes comes from the config's pool (kbc_pool_*), freed all at once
 * by kb_config_free. The kbc_*fail/bad_value functions write the one error
 * line ("config: ...") into the caller's buffer and return the code given.
 */
#ifndef KB_CONFIG_LOAD_H
#define KB_CONFIG_LOAD_H

#include "kb_config.h"

typedef struct load_ctx {
    kb_config *cfg;
    char *err;
    size_t errlen;
} load_ctx;

kp_err kbc_failf(load_ctx *lc, kp_err rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
kp_err kbc_oom(load_ctx *lc);
/* "config: key=value: expected ...", the value escaped and bounded. */
kp_err kbc_bad_value(load_ctx *lc, const char *key, const char *value, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Zeroed memory owned by the config's pool; NULL when out of memory. */
void *kbc_pool_alloc(load_ctx *lc, size_t size);
char *kbc_pool_strndup(load_ctx *lc, const char *s, size_t n);
char *kbc_pool_strdup(load_ctx *lc, const char *s);

/* The value of key: set by a source, else its default, else NULL. */
const char *kbc_effective(const kb_config *cfg, const char *key, kb_config_source *src);

/* Splits a comma-separated list into trimmed items (pool strings). With
 * choices ("a|b|c") each item must be one of them and takes its spelling.
 * KP_ERR__INVAL (no error line written) on an empty or unknown item. */
kp_err kbc_split_list(load_ctx *lc, const char *value, const char *choices, kb_strlist *out);

/* The security protocols, as kb_keydef_choice_index takes them. */
#define KBC_PROTOCOLS "PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL"

/* Parses listeners, listener.security.protocol.map and advertised.listeners
 * into cfg->listeners and cfg->advertised_listeners (kb_config_listeners.c). */
kp_err kbc_resolve_listeners(load_ctx *lc);

#endif
