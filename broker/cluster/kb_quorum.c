#include "kb_quorum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static kb_ctrl_node *append(kb_quorum *q)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? q->cap * 2 : 4;
        kb_ctrl_node *v = realloc(q->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        q->v = v;
        q->cap = cap;
    }
    kb_ctrl_node *node = &q->v[q->n++];
    memset(node, 0, sizeof(*node));
    node->id = -1;
    return node;
}

/* "host:port" or "[v6]:port" into node; false when malformed. */
static bool parse_addr(const char *s, kb_ctrl_node *node)
{
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s)
        return false;
    const char *h = s;
    size_t hl = (size_t)(colon - s);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end != '\0' || port < 1 || port > 65535 || hl == 0 || hl >= sizeof(node->host))
        return false;
    memcpy(node->host, h, hl);
    node->host[hl] = '\0';
    node->port = (uint16_t)port;
    return true;
}

/* "id@host:port" (voters) or "host:port" (bootstrap servers). */
static bool parse_entry(const char *s, bool with_id, kb_ctrl_node *node)
{
    if (!with_id)
        return parse_addr(s, node);
    const char *at = strchr(s, '@');
    if (at == NULL)
        return false;
    char *end;
    long id = strtol(s, &end, 10);
    if (end != at || id < 0 || id > INT32_MAX)
        return false;
    node->id = (int32_t)id;
    return parse_addr(at + 1, node);
}

kp_err kb_quorum_parse(const kb_config *cfg, kb_quorum *q, char *err, size_t errlen)
{
    memset(q, 0, sizeof(*q));
    q->leader = -1;
    q->leader_epoch = -1;
    bool voters = cfg->quorum_voters.n > 0;
    const kb_strlist *l = voters ? &cfg->quorum_voters : &cfg->quorum_bootstrap_servers;
    const char *key = voters ? "controller.quorum.voters" : "controller.quorum.bootstrap.servers";
    if (l->n == 0) {
        snprintf(err, errlen, "process.roles=broker needs controller.quorum.bootstrap.servers "
                 "or controller.quorum.voters");
        return KP_ERR__INVAL;
    }
    for (size_t i = 0; i < l->n; i++) {
        kb_ctrl_node *node = append(q);
        if (node == NULL)
            return KP_ERR__NOMEM;
        if (!parse_entry(l->v[i], voters, node)) {
            snprintf(err, errlen, "%s=%s: expected %s", key, l->v[i],
                     voters ? "id@host:port entries" : "host:port entries");
            return KP_ERR__INVAL;
        }
    }
    return KP_ERR_NONE;
}

void kb_quorum_fini(kb_quorum *q)
{
    free(q->v);
    q->v = NULL;
    q->n = q->cap = 0;
}

int kb_quorum_pick(kb_quorum *q)
{
    if (q->leader >= 0)
        return q->leader;
    return (int)(q->rotate++ % q->n);
}

static int find_id(const kb_quorum *q, int32_t id)
{
    for (size_t i = 0; i < q->n; i++)
        if (q->v[i].id == id)
            return (int)i;
    return -1;
}

bool kb_quorum_learn(kb_quorum *q, int32_t id, int32_t epoch, const char *host, int32_t port)
{
    if (id < 0 || epoch < q->leader_epoch)
        return false;
    int i = find_id(q, id);
    if (i < 0 && host != NULL && port > 0 && port <= 65535 && strlen(host) < sizeof(q->v[0].host) &&
        q->n < KB_QUORUM_MAX_NODES) {
        kb_ctrl_node *node = append(q);
        if (node == NULL)
            return false;
        node->id = id;
        snprintf(node->host, sizeof(node->host), "%s", host);
        node->port = (uint16_t)port;
        i = (int)q->n - 1;
    }
    bool changed = i != q->leader || epoch != q->leader_epoch;
    q->leader_epoch = epoch;
    q->leader = i; /* -1 when the leader's address is unknown: rotate */
    return changed;
}

void kb_quorum_forget_leader(kb_quorum *q)
{
    q->leader = -1;
}

const char *kb_quorum_addr(const kb_quorum *q, int i, char *buf, size_t len)
{
    if (i < 0 || (size_t)i >= q->n)
        return "none";
    const kb_ctrl_node *n = &q->v[i];
    snprintf(buf, len, strchr(n->host, ':') ? "[%s]:%u" : "%s:%u", n->host, n->port);
    return buf;
}
