#include "kb_meta_image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_TOPIC 2  /* ConfigResource.Type */
#define CONFIG_BROKER 4

/* ---- small helpers ----------------------------------------------------- */

/* Makes room for one more element in an array of size-byte elements. */
static bool grow(void *vp, int *cap, int n, size_t size)
{
    void **v = vp;
    if (n < *cap)
        return true;
    int ncap = *cap > 0 ? *cap * 2 : 8;
    void *nv = realloc(*v, (size_t)ncap * size);
    if (nv == NULL)
        return false;
    *v = nv;
    *cap = ncap;
    return true;
}

#define PUSH_SLOT(arr) (grow(&(arr).v, &(arr).cap, (arr).n, sizeof(*(arr).v)) \
                        ? &(arr).v[(arr).n++] : NULL)

static char *dup_str(kp_str s)
{
    if (s.len < 0)
        return NULL;
    char *c = malloc((size_t)s.len + 1);
    if (c != NULL) {
        memcpy(c, s.p, (size_t)s.len);
        c[s.len] = '\0';
    }
    return c;
}

static bool str_is(const char *c, kp_str s)
{
    return c != NULL && s.len >= 0 && strlen(c) == (size_t)s.len &&
           memcmp(c, s.p, (size_t)s.len) == 0;
}

/* Replaces *dst (n elements of size bytes) with a copy of src's n (a
 * negative n: none). */
static bool replace_copy(void *dstp, int32_t *dst_n, const void *src, int32_t n, size_t size)
{
    void **dst = dstp;
    void *v = NULL;
    if (n > 0) {
        v = malloc((size_t)n * size);
        if (v == NULL)
            return false;
        memcpy(v, src, (size_t)n * size);
    }
    free(*dst);
    *dst = v;
    *dst_n = n > 0 ? n : 0;
    return true;
}

static bool copy_ints(kb_mi_ints *dst, kb_i32s src)
{
    return replace_copy(&dst->v, &dst->n, src.v, src.n, sizeof(*src.v));
}

static bool copy_dirs(kb_mi_partition *p, kb_uuids src)
{
    return replace_copy(&p->dirs, &p->n_dirs, src.v, src.n, sizeof(*src.v));
}

static uint8_t *dup_bytes(kp_slice s, int32_t *len)
{
    *len = s.len > 0 ? s.len : 0;
    uint8_t *p = malloc((size_t)*len + 1);
    if (p != NULL && *len > 0)
        memcpy(p, s.p, (size_t)*len);
    return p;
}

/* ---- configs ----------------------------------------------------------- */

static void configs_free(kb_mi_configs *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->v[i].name);
        free(c->v[i].value);
    }
    free(c->v);
    memset(c, 0, sizeof(*c));
}

const char *kb_mi_config_get(const kb_mi_configs *c, const char *name)
{
    for (int i = 0; i < c->n; i++)
        if (strcmp(c->v[i].name, name) == 0)
            return c->v[i].value;
    return NULL;
}

/* Sets (value non-null) or removes one config. */
static kp_err configs_set(kb_mi_configs *c, kp_str name, kp_str value)
{
    int i = 0;
    while (i < c->n && !str_is(c->v[i].name, name))
        i++;
    if (value.len < 0) {
        if (i < c->n) {
            free(c->v[i].name);
            free(c->v[i].value);
            c->v[i] = c->v[--c->n];
        }
        return KP_ERR_NONE;
    }
    char *v = dup_str(value);
    if (v == NULL)
        return KP_ERR__NOMEM;
    if (i < c->n) {
        free(c->v[i].value);
        c->v[i].value = v;
        return KP_ERR_NONE;
    }
    char *n = dup_str(name);
    kb_mi_config *slot = n != NULL ? PUSH_SLOT(*c) : NULL;
    if (slot == NULL) {
        free(n);
        free(v);
        return KP_ERR__NOMEM;
    }
    slot->name = n;
    slot->value = v;
    return KP_ERR_NONE;
}

/* ---- topics ------------------------------------------------------------ */

static bool topic_id_is(const void *entry, const void *key)
{
    const kb_mi_topic *t = entry;
    return memcmp(t->id.b, ((const kp_uuid *)key)->b, sizeof(t->id.b)) == 0;
}

static bool topic_name_is(const void *entry, const void *key)
{
    return str_is(((const kb_mi_topic *)entry)->name, *(const kp_str *)key);
}

static uint64_t id_hash(kp_uuid id)
{
    return kb_map_hash_bytes(id.b, sizeof(id.b));
}

const kb_mi_topic *kb_meta_image_topic_by_id(const kb_meta_image *img, kp_uuid id)
{
    return kb_map_find(&img->topics_by_id, id_hash(id), &id, topic_id_is);
}

const kb_mi_topic *kb_meta_image_topic(const kb_meta_image *img, kp_str name)
{
    return kb_map_find(&img->topics_by_name, kb_map_hash_str(name), &name, topic_name_is);
}

static void partition_free(kb_mi_partition *p)
{
    free(p->replicas.v);
    free(p->isr.v);
    free(p->elr.v);
    free(p->last_known_elr.v);
    free(p->dirs);
}

static void topic_free(kb_mi_topic *t)
{
    for (int32_t i = 0; i < t->n_parts; i++)
        partition_free(&t->parts[i]);
    free(t->parts);
    configs_free(&t->configs);
    free(t->name);
    free(t);
}

static void notify(kb_meta_image *img, kb_mi_event_kind kind, const kb_mi_topic *t, int32_t p)
{
    if (img->listener != NULL)
        img->listener(img->listener_arg, kind, t, p);
}

static kp_err apply_topic(kb_meta_image *img, const kb_mrec *m)
{
    if (m->u.topic.name.len <= 0)
        return KP_ERR__CORRUPT;
    if (kb_meta_image_topic_by_id(img, m->u.topic.id) != NULL ||
        kb_meta_image_topic(img, m->u.topic.name) != NULL)
        return KP_ERR__CORRUPT;
    kb_mi_topic *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return KP_ERR__NOMEM;
    t->id = m->u.topic.id;
    t->name = dup_str(m->u.topic.name);
    kb_mi_topic **slot = t->name != NULL ? PUSH_SLOT(img->topics) : NULL;
    if (slot == NULL) {
        topic_free(t);
        return KP_ERR__NOMEM;
    }
    *slot = t;
    if (kb_map_insert(&img->topics_by_id, id_hash(t->id), t) != KP_ERR_NONE ||
        kb_map_insert(&img->topics_by_name, kb_map_hash_str(m->u.topic.name), t) != KP_ERR_NONE) {
        (void)kb_map_remove_entry(&img->topics_by_id, id_hash(t->id), t);
        img->topics.n--;
        topic_free(t);
        return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static kp_err apply_remove_topic(kb_meta_image *img, const kb_mrec *m)
{
    kb_mi_topic *t = (kb_mi_topic *)kb_meta_image_topic_by_id(img, m->u.topic.id);
    if (t == NULL)
        return KP_ERR__CORRUPT;
    notify(img, KB_MI_TOPIC_REMOVED, t, -1);
    (void)kb_map_remove_entry(&img->topics_by_id, id_hash(t->id), t);
    (void)kb_map_remove_entry(&img->topics_by_name, kb_map_hash_str(kp_str_from(t->name)), t);
    for (int i = 0; i < img->topics.n; i++) {
        if (img->topics.v[i] == t) {
            img->topics.v[i] = img->topics.v[--img->topics.n];
            break;
        }
    }
    topic_free(t);
    return KP_ERR_NONE;
}

/* The partition slot id of t, growing the array to hold it. */
static kb_mi_partition *partition_slot(kb_mi_topic *t, int32_t id)
{
    if (id < 0 || id >= 1 << 20)
        return NULL;
    if (id >= t->n_parts) {
        kb_mi_partition *np = realloc(t->parts, (size_t)(id + 1) * sizeof(*np));
        if (np == NULL)
            return NULL;
        memset(np + t->n_parts, 0, (size_t)(id + 1 - t->n_parts) * sizeof(*np));
        t->parts = np;
        t->n_parts = id + 1;
    }
    return &t->parts[id];
}

static kp_err apply_partition(kb_meta_image *img, const kb_mrec *m)
{
    const kb_mrec_partition *r = &m->u.part;
    kb_mi_topic *t = (kb_mi_topic *)kb_meta_image_topic_by_id(img, r->topic_id);
    if (t == NULL)
        return KP_ERR__CORRUPT;
    kb_mi_partition *p = partition_slot(t, r->partition_id);
    if (p == NULL)
        return r->partition_id < 0 ? KP_ERR__CORRUPT : KP_ERR__NOMEM;
    kb_i32s none = {0, NULL};
    if (!copy_ints(&p->replicas, r->replicas) || !copy_ints(&p->isr, r->isr) ||
        !copy_ints(&p->elr, r->elr.n >= 0 ? r->elr : none) ||
        !copy_ints(&p->last_known_elr, r->last_known_elr.n >= 0 ? r->last_known_elr : none) ||
        !copy_dirs(p, r->directories))
        return KP_ERR__NOMEM;
    p->leader = r->leader;
    p->leader_epoch = r->leader_epoch;
    p->partition_epoch = r->partition_epoch;
    p->leader_recovery_state = r->leader_recovery_state;
    p->present = true;
    notify(img, KB_MI_PARTITION, t, r->partition_id);
    return KP_ERR_NONE;
}

/* PartitionChangeRecord: only the fields it carries change; a new leader
 * bumps the leader epoch, and every change the partition epoch (Kafka's
 * PartitionRegistration.merge). */
static kp_err apply_partition_change(kb_meta_image *img, const kb_mrec *m)
{
    const kb_mrec_partition *r = &m->u.part;
    kb_mi_topic *t = (kb_mi_topic *)kb_meta_image_topic_by_id(img, r->topic_id);
    if (t == NULL || r->partition_id < 0 || r->partition_id >= t->n_parts ||
        !t->parts[r->partition_id].present)
        return KP_ERR__CORRUPT;
    kb_mi_partition *p = &t->parts[r->partition_id];
    if ((r->isr.n >= 0 && !copy_ints(&p->isr, r->isr)) ||
        (r->replicas.n >= 0 && !copy_ints(&p->replicas, r->replicas)) ||
        (r->elr.n >= 0 && !copy_ints(&p->elr, r->elr)) ||
        (r->last_known_elr.n >= 0 && !copy_ints(&p->last_known_elr, r->last_known_elr)) ||
        (r->directories.n >= 0 && !copy_dirs(p, r->directories)))
        return KP_ERR__NOMEM;
    if (r->leader != -2) {
        p->leader = r->leader;
        p->leader_epoch++;
    }
    if (r->leader_recovery_state >= 0)
        p->leader_recovery_state = r->leader_recovery_state;
    p->partition_epoch++;
    notify(img, KB_MI_PARTITION, t, r->partition_id);
    return KP_ERR_NONE;
}

static void clear_elr(kb_mi_topic *t)
{
    for (int32_t i = 0; i < t->n_parts; i++) {
        kb_mi_partition *p = &t->parts[i];
        free(p->elr.v);
        free(p->last_known_elr.v);
        p->elr = (kb_mi_ints){0, NULL};
        p->last_known_elr = (kb_mi_ints){0, NULL};
    }
}

static kp_err apply_clear_elr(kb_meta_image *img, const kb_mrec *m)
{
    if (m->u.clear_elr_topic.len > 0) {
        kb_mi_topic *t = (kb_mi_topic *)kb_meta_image_topic(img, m->u.clear_elr_topic);
        if (t == NULL)
            return KP_ERR__CORRUPT;
        clear_elr(t);
        return KP_ERR_NONE;
    }
    for (int i = 0; i < img->topics.n; i++)
        clear_elr(img->topics.v[i]);
    return KP_ERR_NONE;
}

/* ---- brokers ----------------------------------------------------------- */

static int broker_index(const kb_meta_image *img, int32_t id)
{
    for (int i = 0; i < img->brokers.n; i++)
        if (img->brokers.v[i].id == id)
            return i;
    return -1;
}

const kb_mi_broker *kb_meta_image_broker(const kb_meta_image *img, int32_t id)
{
    int i = broker_index(img, id);
    return i >= 0 ? &img->brokers.v[i] : NULL;
}

static void broker_free(kb_mi_broker *b)
{
    for (int i = 0; i < b->n_endpoints; i++) {
        free(b->endpoints[i].listener);
        free(b->endpoints[i].host);
    }
    free(b->endpoints);
    free(b->rack);
}

static kp_err broker_fill(kb_mi_broker *b, const kb_mrec_register_broker *r)
{
    memset(b, 0, sizeof(*b));
    b->id = r->broker_id;
    b->epoch = r->broker_epoch;
    b->incarnation = r->incarnation_id;
    b->fenced = r->fenced;
    b->in_controlled_shutdown = r->in_controlled_shutdown;
    b->rack = dup_str(r->rack);
    b->endpoints = calloc((size_t)r->n_endpoints + 1, sizeof(*b->endpoints));
    if (b->endpoints == NULL || (r->rack.len >= 0 && b->rack == NULL))
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < r->n_endpoints; i++) {
        kb_mi_endpoint *e = &b->endpoints[i];
        e->listener = dup_str(r->endpoints[i].name);
        e->host = dup_str(r->endpoints[i].host);
        e->port = r->endpoints[i].port;
        e->security_protocol = r->endpoints[i].security_protocol;
        b->n_endpoints++;
        if (e->listener == NULL || e->host == NULL)
            return KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static kp_err apply_register_broker(kb_meta_image *img, const kb_mrec *m)
{
    kb_mi_broker nb;
    kp_err e = broker_fill(&nb, &m->u.reg);
    if (e != KP_ERR_NONE) {
        broker_free(&nb);
        return e;
    }
    int i = broker_index(img, nb.id);
    kb_mi_broker *slot = i >= 0 ? &img->brokers.v[i] : PUSH_SLOT(img->brokers);
    if (slot == NULL) {
        broker_free(&nb);
        return KP_ERR__NOMEM;
    }
    if (i >= 0)
        broker_free(slot);
    *slot = nb;
    return KP_ERR_NONE;
}

static kp_err apply_broker_change(kb_meta_image *img, const kb_mrec *m)
{
    int i = broker_index(img, m->u.broker.broker_id);
    if (i < 0)
        return KP_ERR__CORRUPT;
    kb_mi_broker *b = &img->brokers.v[i];
    switch (m->type) {
    case KB_MREC_UNREGISTER_BROKER:
        broker_free(b);
        img->brokers.v[i] = img->brokers.v[--img->brokers.n];
        break;
    case KB_MREC_FENCE_BROKER:
        b->fenced = true;
        break;
    case KB_MREC_UNFENCE_BROKER:
        b->fenced = false;
        break;
    default: /* BrokerRegistrationChange */
        if (m->u.broker.fenced != 0)
            b->fenced = m->u.broker.fenced > 0;
        if (m->u.broker.in_controlled_shutdown > 0)
            b->in_controlled_shutdown = true;
        break;
    }
    return KP_ERR_NONE;
}

/* ---- configs, features, producer ids ----------------------------------- */

static kb_mi_configs *broker_configs(kb_meta_image *img, kp_str resource, bool create)
{
    for (int i = 0; i < img->broker_configs.n; i++)
        if (str_is(img->broker_configs.v[i].resource, resource))
            return &img->broker_configs.v[i].configs;
    if (!create)
        return NULL;
    char *name = dup_str(resource.len >= 0 ? resource : KP_STR_LIT(""));
    kb_mi_resource_configs *slot = name != NULL ? PUSH_SLOT(img->broker_configs) : NULL;
    if (slot == NULL) {
        free(name);
        return NULL;
    }
    memset(slot, 0, sizeof(*slot));
    slot->resource = name;
    return &slot->configs;
}

const char *kb_meta_image_broker_config(const kb_meta_image *img, const char *broker,
                                        const char *name)
{
    kb_mi_configs *c = broker_configs((kb_meta_image *)img, kp_str_from(broker), false);
    return c != NULL ? kb_mi_config_get(c, name) : NULL;
}

static kp_err apply_config(kb_meta_image *img, const kb_mrec *m)
{
    const kb_mrec_config *r = &m->u.config;
    if (r->name.len <= 0)
        return KP_ERR__CORRUPT;
    if (r->resource_type == CONFIG_TOPIC) {
        kb_mi_topic *t = (kb_mi_topic *)kb_meta_image_topic(img, r->resource_name);
        if (t == NULL) /* configs of a topic not yet (or no longer) there */
            return KP_ERR_NONE;
        kp_err e = configs_set(&t->configs, r->name, r->value);
        if (e == KP_ERR_NONE)
            notify(img, KB_MI_TOPIC_CONFIG, t, -1);
        return e;
    }
    if (r->resource_type != CONFIG_BROKER)
        return KP_ERR_NONE; /* broker loggers, client metrics, groups: not kept */
    kb_mi_configs *c = broker_configs(img, r->resource_name, true);
    return c != NULL ? configs_set(c, r->name, r->value) : KP_ERR__NOMEM;
}

int16_t kb_meta_image_feature(const kb_meta_image *img, const char *name)
{
    for (int i = 0; i < img->features.n; i++)
        if (strcmp(img->features.v[i].name, name) == 0)
            return img->features.v[i].level;
    return 0;
}

static kp_err apply_feature(kb_meta_image *img, const kb_mrec *m)
{
    for (int i = 0; i < img->features.n; i++) {
        if (str_is(img->features.v[i].name, m->u.feature.name)) {
            img->features.v[i].level = m->u.feature.level;
            return KP_ERR_NONE;
        }
    }
    char *name = dup_str(m->u.feature.name);
    kb_mi_feature *slot = name != NULL ? PUSH_SLOT(img->features) : NULL;
    if (slot == NULL) {
        free(name);
        return KP_ERR__NOMEM;
    }
    slot->name = name;
    slot->level = m->u.feature.level;
    return KP_ERR_NONE;
}

/* ---- security: SCRAM, ACLs, quotas, tokens ----------------------------- */

static int scram_index(const kb_meta_image *img, kp_str user, int8_t mech)
{
    for (int i = 0; i < img->scram.n; i++)
        if (img->scram.v[i].mechanism == mech && str_is(img->scram.v[i].user, user))
            return i;
    return -1;
}

static void scram_free(kb_mi_scram *s)
{
    free(s->user);
    free(s->salt);
    free(s->stored_key);
    free(s->server_key);
}

static kp_err apply_scram(kb_meta_image *img, const kb_mrec *m)
{
    const kb_mrec_scram *r = &m->u.scram;
    int i = scram_index(img, r->name, r->mechanism);
    if (m->type == KB_MREC_REMOVE_USER_SCRAM_CREDENTIAL) {
        if (i >= 0) {
            scram_free(&img->scram.v[i]);
            img->scram.v[i] = img->scram.v[--img->scram.n];
        }
        return KP_ERR_NONE;
    }
    kb_mi_scram s = {.mechanism = r->mechanism, .iterations = r->iterations};
    s.user = dup_str(r->name);
    s.salt = dup_bytes(r->salt, &s.salt_len);
    s.stored_key = dup_bytes(r->stored_key, &s.stored_key_len);
    s.server_key = dup_bytes(r->server_key, &s.server_key_len);
    kb_mi_scram *slot = i >= 0 ? &img->scram.v[i] : NULL;
    if (s.user != NULL && s.salt != NULL && s.stored_key != NULL && s.server_key != NULL &&
        slot == NULL)
        slot = PUSH_SLOT(img->scram);
    else if (slot != NULL)
        scram_free(slot);
    if (slot == NULL || s.user == NULL || s.salt == NULL || s.stored_key == NULL ||
        s.server_key == NULL) {
        scram_free(&s);
        return KP_ERR__NOMEM;
    }
    *slot = s;
    return KP_ERR_NONE;
}

static void acl_free(kb_mi_acl *a)
{
    free(a->resource_name);
    free(a->principal);
    free(a->host);
}

static kp_err apply_acl(kb_meta_image *img, const kb_mrec *m)
{
    const kb_mrec_acl *r = &m->u.acl;
    for (int i = 0; i < img->acls.n; i++) {
        if (memcmp(img->acls.v[i].id.b, r->id.b, sizeof(r->id.b)) == 0) {
            acl_free(&img->acls.v[i]);
            img->acls.v[i] = img->acls.v[--img->acls.n];
            break;
        }
    }
    if (m->type == KB_MREC_REMOVE_ACCESS_CONTROL_ENTRY)
        return KP_ERR_NONE;
    kb_mi_acl a = {r->id, r->resource_type, r->pattern_type, r->operation, r->permission_type,
                   dup_str(r->resource_name), dup_str(r->principal), dup_str(r->host)};
    kb_mi_acl *slot = a.resource_name != NULL && a.principal != NULL && a.host != NULL
                          ? PUSH_SLOT(img->acls) : NULL;
    if (slot == NULL) {
        acl_free(&a);
        return KP_ERR__NOMEM;
    }
    *slot = a;
    return KP_ERR_NONE;
}

/* "user=alice,client-id=<default>": the quota entity as one key. */
static char *quota_entity(const kb_mrec_quota *q)
{
    size_t len = 1;
    for (int32_t i = 0; i < q->n_entity; i++)
        len += (size_t)(q->entity[i].type.len > 0 ? q->entity[i].type.len : 0) +
               (size_t)(q->entity[i].name.len > 0 ? q->entity[i].name.len : 0) + 12;
    char *s = malloc(len);
    if (s == NULL)
        return NULL;
    size_t off = 0;
    for (int32_t i = 0; i < q->n_entity; i++) {
        kp_str t = q->entity[i].type, n = q->entity[i].name;
        kp_str name = n.len >= 0 ? n : KP_STR_LIT("<default>");
        off += (size_t)snprintf(s + off, len - off, "%s%.*s=%.*s", i > 0 ? "," : "",
                                t.len > 0 ? (int)t.len : 0, t.len > 0 ? t.p : "",
                                name.len > 0 ? (int)name.len : 0, name.len > 0 ? name.p : "");
    }
    s[off] = '\0';
    return s;
}

static kp_err apply_quota(kb_meta_image *img, const kb_mrec *m)
{
    const kb_mrec_quota *r = &m->u.quota;
    char *entity = quota_entity(r);
    if (entity == NULL)
        return KP_ERR__NOMEM;
    for (int i = 0; i < img->quotas.n; i++) {
        kb_mi_quota *q = &img->quotas.v[i];
        if (strcmp(q->entity, entity) == 0 && str_is(q->key, r->key)) {
            free(entity);
            if (!r->remove) {
                q->value = r->value;
                return KP_ERR_NONE;
            }
            free(q->entity);
            free(q->key);
            *q = img->quotas.v[--img->quotas.n];
            return KP_ERR_NONE;
        }
    }
    if (r->remove) {
        free(entity);
        return KP_ERR_NONE;
    }
    char *key = dup_str(r->key);
    kb_mi_quota *slot = key != NULL ? PUSH_SLOT(img->quotas) : NULL;
    if (slot == NULL) {
        free(entity);
        free(key);
        return KP_ERR__NOMEM;
    }
    *slot = (kb_mi_quota){entity, key, r->value};
    return KP_ERR_NONE;
}

/* ---- the image --------------------------------------------------------- */

void kb_meta_image_init(kb_meta_image *img)
{
    memset(img, 0, sizeof(*img));
    kb_map_init(&img->topics_by_id);
    kb_map_init(&img->topics_by_name);
    img->applied_offset = -1;
}

void kb_meta_image_fini(kb_meta_image *img)
{
    for (int i = 0; i < img->brokers.n; i++)
        broker_free(&img->brokers.v[i]);
    for (int i = 0; i < img->topics.n; i++)
        topic_free(img->topics.v[i]);
    for (int i = 0; i < img->features.n; i++)
        free(img->features.v[i].name);
    for (int i = 0; i < img->broker_configs.n; i++) {
        free(img->broker_configs.v[i].resource);
        configs_free(&img->broker_configs.v[i].configs);
    }
    for (int i = 0; i < img->scram.n; i++)
        scram_free(&img->scram.v[i]);
    for (int i = 0; i < img->acls.n; i++)
        acl_free(&img->acls.v[i]);
    for (int i = 0; i < img->quotas.n; i++) {
        free(img->quotas.v[i].entity);
        free(img->quotas.v[i].key);
    }
    free(img->brokers.v);
    free(img->topics.v);
    free(img->features.v);
    free(img->broker_configs.v);
    free(img->scram.v);
    free(img->acls.v);
    free(img->quotas.v);
    kb_map_fini(&img->topics_by_id);
    kb_map_fini(&img->topics_by_name);
    memset(img, 0, sizeof(*img));
}

void kb_meta_image_set_listener(kb_meta_image *img, kb_mi_listener *fn, void *arg)
{
    img->listener = fn;
    img->listener_arg = arg;
}

static kp_err apply_decoded(kb_meta_image *img, const kb_mrec *m)
{
    switch (m->type) {
    case KB_MREC_REGISTER_BROKER: return apply_register_broker(img, m);
    case KB_MREC_UNREGISTER_BROKER:
    case KB_MREC_FENCE_BROKER:
    case KB_MREC_UNFENCE_BROKER:
    case KB_MREC_BROKER_REGISTRATION_CHANGE: return apply_broker_change(img, m);
    case KB_MREC_TOPIC: return apply_topic(img, m);
    case KB_MREC_REMOVE_TOPIC: return apply_remove_topic(img, m);
    case KB_MREC_PARTITION: return apply_partition(img, m);
    case KB_MREC_PARTITION_CHANGE: return apply_partition_change(img, m);
    case KB_MREC_CLEAR_ELR: return apply_clear_elr(img, m);
    case KB_MREC_CONFIG: return apply_config(img, m);
    case KB_MREC_FEATURE_LEVEL: return apply_feature(img, m);
    case KB_MREC_PRODUCER_IDS:
        if (m->u.pids.next_producer_id > img->next_producer_id)
            img->next_producer_id = m->u.pids.next_producer_id;
        return KP_ERR_NONE;
    case KB_MREC_USER_SCRAM_CREDENTIAL:
    case KB_MREC_REMOVE_USER_SCRAM_CREDENTIAL: return apply_scram(img, m);
    case KB_MREC_ACCESS_CONTROL_ENTRY:
    case KB_MREC_REMOVE_ACCESS_CONTROL_ENTRY: return apply_acl(img, m);
    case KB_MREC_CLIENT_QUOTA: return apply_quota(img, m);
    case KB_MREC_DELEGATION_TOKEN: img->delegation_tokens++; return KP_ERR_NONE;
    case KB_MREC_REMOVE_DELEGATION_TOKEN:
        if (img->delegation_tokens > 0)
            img->delegation_tokens--;
        return KP_ERR_NONE;
    default: return KP_ERR_NONE; /* NoOp, transactions, controllers, ZK migration */
    }
}

kp_err kb_meta_image_apply(kb_meta_image *img, const kb_meta_record *rec)
{
    kp_arena a;
    kp_arena_init(&a);
    kp_err e;
    if (rec->control) {
        int16_t v;
        e = kb_ctrl_check(rec, &a, &v);
    } else {
        kb_mrec m;
        e = kb_mrec_decode(rec, &a, &m);
        if (e == KP_ERR_NONE)
            e = apply_decoded(img, &m);
    }
    kp_arena_fini(&a);
    if (e == KP_ERR_NONE) {
        img->applied_offset = rec->offset;
        img->records++;
    }
    return e;
}
