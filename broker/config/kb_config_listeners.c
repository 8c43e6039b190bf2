/* kb_config_listeners: the listener half of the configuration loader.
 * `listeners`, `listener.security.protocol.map` and `advertised.listeners`
 * are parsed and checked as Kafka checks them (names and ports
 * unique, every listener mapped to a security protocol, advertised
 * listeners a subset of the listeners, no wildcard host advertised), and
 * looked up by name afterwards. See kb_config_load.h for the shared loader
 * state. */
#include "kb_config_load.h"
#include "kb_keydef.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const protocol_names[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};

typedef struct proto_map {
    size_t n;
    char **name;
    kb_security_protocol *proto;
} proto_map;

typedef struct endpoint {
    const char *name, *host;
    size_t name_n, host_n;
    uint16_t port;
} endpoint;

static bool host_char_ok(char c, bool bracketed)
{
    return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_' ||
           (bracketed && (c == ':' || c == '%'));
}

/* "NAME://host:port", "NAME://[v6]:port", "NAME://:port". */
static bool split_endpoint(const char *s, size_t n, endpoint *ep)
{
    const char *sep = memmem(s, n, "://", 3), *end = s + n, *port;
    bool bracketed;

    if (sep == NULL || sep == s)
        return false;
    ep->name = s;
    ep->name_n = (size_t)(sep - s);
    for (size_t i = 0; i < ep->name_n; i++) {
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return false;
    }
    const char *r = sep + 3;
    bracketed = r < end && *r == '[';
    if (bracketed) {
        const char *close = memchr(r, ']', (size_t)(end - r));
        if (close == NULL || close == r + 1 || close + 1 >= end || close[1] != ':')
            return false;
        ep->host = r + 1;
        ep->host_n = (size_t)(close - r - 1);
        port = close + 2;
    } else {
        const char *colon = memrchr(r, ':', (size_t)(end - r));
        if (colon == NULL)
            return false;
        ep->host = r;
        ep->host_n = (size_t)(colon - r);
        port = colon + 1;
    }
    for (size_t i = 0; i < ep->host_n; i++) {
        if (!host_char_ok(ep->host[i], bracketed))
            return false;
    }
    long v = 0;
    if (port == end || end - port > 5)
        return false;
    for (const char *p = port; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return false;
        v = v * 10 + (*p - '0');
    }
    ep->port = (uint16_t)v;
    return v <= 65535;
}

static char *pool_upper(load_ctx *lc, const char *s, size_t n)
{
    char *d = kbc_pool_strndup(lc, s, n);

    for (size_t i = 0; d != NULL && i < n; i++)
        d[i] = (char)toupper((unsigned char)d[i]);
    return d;
}

#define PROTOCOL_MAP_EXPECT \
    "expected NAME:PROTOCOL pairs with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"

static kp_err parse_protocol_map(load_ctx *lc, proto_map *map)
{
    const char *key = "listener.security.protocol.map";
    kb_config_source src;
    const char *value = kbc_effective(lc->cfg, key, &src);
    kb_strlist items;

    kp_err rc = kbc_split_list(lc, value, NULL, &items);
    if (rc == KP_ERR__NOMEM)
        return rc;
    if (rc != KP_ERR_NONE)
        return kbc_bad_value(lc, key, value, PROTOCOL_MAP_EXPECT);
    size_t extra = lc->cfg->controller_listener_names.n;
    map->name = kbc_pool_alloc(lc, (items.n + extra) * sizeof *map->name);
    map->proto = kbc_pool_alloc(lc, (items.n + extra) * sizeof *map->proto);
    if (map->name == NULL || map->proto == NULL)
        return kbc_oom(lc);
    for (size_t i = 0; i < items.n; i++) {
        const char *colon = strchr(items.v[i], ':');
        int p = colon == NULL ? -1 : kb_keydef_choice_index(KBC_PROTOCOLS, colon + 1, strlen(colon + 1));
        if (p < 0 || colon == items.v[i])
            return kbc_bad_value(lc, key, value, PROTOCOL_MAP_EXPECT);
        map->name[map->n] = pool_upper(lc, items.v[i], (size_t)(colon - items.v[i]));
        map->proto[map->n++] = (kb_security_protocol)p;
    }
    /* As Kafka: with the map left at its default, controller listeners are PLAINTEXT. */
    for (size_t i = 0; src == KB_SRC_DEFAULT && i < extra; i++) {
        map->name[map->n] = pool_upper(lc, lc->cfg->controller_listener_names.v[i],
                                       strlen(lc->cfg->controller_listener_names.v[i]));
        map->proto[map->n++] = KB_SEC_PLAINTEXT;
    }
    for (size_t i = 0; i < map->n; i++) {
        if (map->name[i] == NULL)
            return kbc_oom(lc);
    }
    return KP_ERR_NONE;
}

static int map_find(const proto_map *map, const char *name)
{
    for (size_t i = map->n; i-- > 0;) { /* the last mapping of a name wins */
        if (strcmp(map->name[i], name) == 0)
            return (int)map->proto[i];
    }
    return -1;
}

#define LISTENER_EXPECT "expected NAME://host:port entries (empty host = all interfaces, " \
                        "IPv6 in [brackets], port 0-65535)"

/* Parses key's value into out; names upper-cased, protocols from map. */
static kp_err parse_listener_list(load_ctx *lc, const char *key, const proto_map *map,
                                  kb_listener_list *out)
{
    kb_config_source src;
    const char *value = kbc_effective(lc->cfg, key, &src);
    kb_strlist items;
    endpoint ep;

    kp_err rc = kbc_split_list(lc, value, NULL, &items);
    if (rc == KP_ERR__NOMEM)
        return rc;
    if (rc != KP_ERR_NONE)
        return kbc_bad_value(lc, key, value, LISTENER_EXPECT);
    out->n = 0;
    out->v = kbc_pool_alloc(lc, (items.n + 1) * sizeof *out->v);
    if (out->v == NULL)
        return kbc_oom(lc);
    for (size_t i = 0; i < items.n; i++) {
        kb_listener *li = &out->v[out->n++];
        if (!split_endpoint(items.v[i], strlen(items.v[i]), &ep))
            return kbc_bad_value(lc, key, value, LISTENER_EXPECT);
        li->li_name = pool_upper(lc, ep.name, ep.name_n);
        li->li_host = kbc_pool_strndup(lc, ep.host, ep.host_n);
        li->li_port = ep.port;
        if (li->li_name == NULL || li->li_host == NULL)
            return kbc_oom(lc);
        int p = map_find(map, li->li_name);
        if (p < 0)
            return kbc_bad_value(lc, key, value,
                                 "listener name %s has no entry in listener.security.protocol.map",
                                 li->li_name);
        li->li_protocol = (kb_security_protocol)p;
        for (size_t j = 0; j + 1 < out->n; j++) {
            if (strcmp(out->v[j].li_name, li->li_name) == 0)
                return kbc_bad_value(lc, key, value, "listener name %s appears twice", li->li_name);
        }
    }
    return KP_ERR_NONE;
}

static bool host_is_wildcard(const char *host)
{
    return host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

static kp_err check_listeners(load_ctx *lc)
{
    const kb_listener_list *ls = &lc->cfg->listeners;
    kb_config_source src;
    const char *value = kbc_effective(lc->cfg, "listeners", &src);

    if (ls->n == 0)
        return kbc_bad_value(lc, "listeners", value, "expected at least one listener");
    for (size_t i = 0; i < ls->n; i++) {
        for (size_t j = 0; j < i; j++) {
            if (ls->v[i].li_port != 0 && ls->v[i].li_port == ls->v[j].li_port)
                return kbc_bad_value(lc, "listeners", value, "port %u is used by two listeners",
                                     (unsigned)ls->v[i].li_port);
        }
        for (size_t j = 0; j < lc->cfg->controller_listener_names.n; j++) {
            if (strcasecmp(ls->v[i].li_name, lc->cfg->controller_listener_names.v[j]) == 0)
                ls->v[i].li_controller = true;
        }
    }
    return KP_ERR_NONE;
}

/* One advertised entry per listener: the explicit one, else the listener itself. */
static kp_err resolve_advertised(load_ctx *lc, const proto_map *map)
{
    kb_config *cfg = lc->cfg;
    kb_listener_list explicit = {0, NULL};
    kb_config_source src;
    const char *value = kbc_effective(cfg, "advertised.listeners", &src);

    if (value != NULL) {
        kp_err rc = parse_listener_list(lc, "advertised.listeners", map, &explicit);
        if (rc != KP_ERR_NONE)
            return rc;
    }
    for (size_t i = 0; i < explicit.n; i++) {
        if (kb_config_listener(cfg, explicit.v[i].li_name) == NULL)
            return kbc_bad_value(lc, "advertised.listeners", value,
                                 "listener name %s is not in listeners", explicit.v[i].li_name);
        if (explicit.v[i].li_host[0] != '\0' && host_is_wildcard(explicit.v[i].li_host))
            return kbc_bad_value(lc, "advertised.listeners", value,
                                 "expected a host clients can connect to, not %s",
                                 explicit.v[i].li_host);
    }
    cfg->advertised_listeners.v = kbc_pool_alloc(lc, cfg->listeners.n * sizeof(kb_listener));
    if (cfg->advertised_listeners.v == NULL)
        return kbc_oom(lc);
    for (size_t i = 0; i < cfg->listeners.n; i++) {
        kb_listener *ad = &cfg->advertised_listeners.v[cfg->advertised_listeners.n++];
        *ad = cfg->listeners.v[i];
        for (size_t j = 0; j < explicit.n; j++) {
            if (strcmp(explicit.v[j].li_name, ad->li_name) == 0) {
                ad->li_host = explicit.v[j].li_host;
                ad->li_port = explicit.v[j].li_port;
            }
        }
        if (host_is_wildcard(ad->li_host))
            ad->li_host = kbc_pool_strdup(lc, "localhost"); /* see kb_config.h */
        if (ad->li_host == NULL)
            return kbc_oom(lc);
    }
    return KP_ERR_NONE;
}

kp_err kbc_resolve_listeners(load_ctx *lc)
{
    proto_map map = {0, NULL, NULL};

    kp_err rc = parse_protocol_map(lc, &map);
    if (rc == KP_ERR_NONE)
        rc = parse_listener_list(lc, "listeners", &map, &lc->cfg->listeners);
    if (rc == KP_ERR_NONE)
        rc = check_listeners(lc);
    if (rc == KP_ERR_NONE)
        rc = resolve_advertised(lc, &map);
    return rc;
}

/* ------------------------------------------------------------------------
 * Lookups
 * ------------------------------------------------------------------------ */

static const kb_listener *listener_in(const kb_listener_list *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++) {
        if (strcasecmp(l->v[i].li_name, name) == 0)
            return &l->v[i];
    }
    return NULL;
}

const kb_listener *kb_config_listener(const kb_config *cfg, const char *name)
{
    return listener_in(&cfg->listeners, name);
}

const kb_listener *kb_config_advertised(const kb_config *cfg, const char *name)
{
    return listener_in(&cfg->advertised_listeners, name);
}

const char *kb_security_protocol_name(kb_security_protocol p)
{
    if ((unsigned)p >= sizeof protocol_names / sizeof protocol_names[0])
        return "?";
    return protocol_names[p];
}
