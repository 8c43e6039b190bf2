#include "kb_meta_records.h"

#include <string.h>

#include "kp_msg.h"

typedef struct mrec_info {
    int16_t max_version; /* -1: not a type Runnel knows */
    const char *name;
} mrec_info;

#define MREC_TYPES 30
static const mrec_info mrec_table[MREC_TYPES] = {
    [KB_MREC_REGISTER_BROKER] = {4, "RegisterBrokerRecord"},
    [KB_MREC_UNREGISTER_BROKER] = {0, "UnregisterBrokerRecord"},
    [KB_MREC_TOPIC] = {0, "TopicRecord"},
    [KB_MREC_PARTITION] = {2, "PartitionRecord"},
    [KB_MREC_CONFIG] = {0, "ConfigRecord"},
    [KB_MREC_PARTITION_CHANGE] = {2, "PartitionChangeRecord"},
    [6] = {-1, NULL},
    [KB_MREC_FENCE_BROKER] = {0, "FenceBrokerRecord"},
    [KB_MREC_UNFENCE_BROKER] = {0, "UnfenceBrokerRecord"},
    [KB_MREC_REMOVE_TOPIC] = {0, "RemoveTopicRecord"},
    [KB_MREC_DELEGATION_TOKEN] = {0, "DelegationTokenRecord"},
    [KB_MREC_USER_SCRAM_CREDENTIAL] = {0, "UserScramCredentialRecord"},
    [KB_MREC_FEATURE_LEVEL] = {0, "FeatureLevelRecord"},
    [13] = {-1, NULL},
    [KB_MREC_CLIENT_QUOTA] = {0, "ClientQuotaRecord"},
    [KB_MREC_PRODUCER_IDS] = {0, "ProducerIdsRecord"},
    [16] = {-1, NULL},
    [KB_MREC_BROKER_REGISTRATION_CHANGE] = {3, "BrokerRegistrationChangeRecord"},
    [KB_MREC_ACCESS_CONTROL_ENTRY] = {0, "AccessControlEntryRecord"},
    [KB_MREC_REMOVE_ACCESS_CONTROL_ENTRY] = {0, "RemoveAccessControlEntryRecord"},
    [KB_MREC_NO_OP] = {0, "NoOpRecord"},
    [KB_MREC_ZK_MIGRATION_STATE] = {0, "ZkMigrationStateRecord"},
    [KB_MREC_REMOVE_USER_SCRAM_CREDENTIAL] = {0, "RemoveUserScramCredentialRecord"},
    [KB_MREC_BEGIN_TRANSACTION] = {0, "BeginTransactionRecord"},
    [KB_MREC_END_TRANSACTION] = {0, "EndTransactionRecord"},
    [KB_MREC_ABORT_TRANSACTION] = {0, "AbortTransactionRecord"},
    [KB_MREC_REMOVE_DELEGATION_TOKEN] = {0, "RemoveDelegationTokenRecord"},
    [KB_MREC_REGISTER_CONTROLLER] = {0, "RegisterControllerRecord"},
    [KB_MREC_CLEAR_ELR] = {0, "ClearElrRecord"},
    [KB_MREC_UNREGISTER_CONTROLLER] = {0, "UnregisterControllerRecord"},
};

int16_t kb_mrec_max_version(int type)
{
    if (type < 0 || type >= MREC_TYPES || mrec_table[type].name == NULL)
        return -1;
    return mrec_table[type].max_version;
}

const char *kb_mrec_name(int type)
{
    return kb_mrec_max_version(type) < 0 ? "unknown" : mrec_table[type].name;
}

const char *kb_ctrl_name(int type)
{
    switch (type) {
    case KB_CTRL_LEADER_CHANGE:
        return "LeaderChangeMessage";
    case KB_CTRL_SNAPSHOT_HEADER:
        return "SnapshotHeaderRecord";
    case KB_CTRL_SNAPSHOT_FOOTER:
        return "SnapshotFooterRecord";
    case KB_CTRL_KRAFT_VERSION:
        return "KRaftVersionRecord";
    case KB_CTRL_VOTERS:
        return "VotersRecord";
    default:
        return "unknown";
    }
}

/* ---- field readers (every record is flexible: compact encodings) ------- */

static kp_str read_str(kp_reader *r)
{
    return kp_read_str(r, true);
}

/* A nullable array of fixed-size elements, each read by one call of
 * read_one into the arena; *n receives the count (-1 null). */
static void *read_array(kp_reader *r, kp_arena *a, size_t elem, int32_t *n,
                        void (*read_one)(kp_reader *r, void *out))
{
    *n = -1;
    int32_t count = kp_read_array_len(r, true, elem);
    if (r->err != KP_ERR_NONE || count < 0)
        return NULL;
    uint8_t *v = kp_arena_calloc(a, (size_t)count + 1, elem);
    if (v == NULL) {
        kp_reader_fail(r, KP_ERR__NOMEM);
        return NULL;
    }
    for (int32_t i = 0; i < count; i++)
        read_one(r, v + (size_t)i * elem);
    *n = count;
    return v;
}

static void read_one_i32(kp_reader *r, void *out)
{
    *(int32_t *)out = kp_read_i32(r);
}

static void read_one_uuid(kp_reader *r, void *out)
{
    *(kp_uuid *)out = kp_read_uuid(r);
}

static kb_i32s read_i32s(kp_reader *r, kp_arena *a)
{
    kb_i32s out;
    out.v = read_array(r, a, sizeof(int32_t), &out.n, read_one_i32);
    return out;
}

static kb_uuids read_uuids(kp_reader *r, kp_arena *a)
{
    kb_uuids out;
    out.v = read_array(r, a, sizeof(kp_uuid), &out.n, read_one_uuid);
    return out;
}

/* A non-nullable array count with its elements' minimum size. */
static int32_t read_count(kp_reader *r, size_t min_elem)
{
    int32_t n = kp_read_array_len(r, true, min_elem);
    if (r->err == KP_ERR_NONE && n < 0)
        kp_reader_fail(r, KP_ERR__MALFORMED);
    return r->err == KP_ERR_NONE ? n : 0;
}

static void *arena_array(kp_reader *r, kp_arena *a, int32_t n, size_t size)
{
    void *p = kp_arena_calloc(a, (size_t)n + 1, size);
    if (p == NULL)
        kp_reader_fail(r, KP_ERR__NOMEM);
    return p;
}

/* Reads the tagged section, handing each tag to fn (unknown tags ignored). */
typedef void tag_fn(kp_reader *sub, uint32_t tag, kp_arena *a, kb_mrec *m);

static void read_tags(kp_reader *r, kp_arena *a, kb_mrec *m, tag_fn *fn)
{
    uint32_t n = kp_read_uvarint(r);
    for (uint32_t i = 0; i < n && r->err == KP_ERR_NONE; i++) {
        kp_reader sub;
        uint32_t tag = kp_read_tag(r, &sub);
        if (r->err != KP_ERR_NONE)
            return;
        if (fn != NULL)
            fn(&sub, tag, a, m);
        if (sub.err != KP_ERR_NONE)
            kp_reader_fail(r, sub.err);
    }
}

/* ---- one decoder per record body --------------------------------------- */

static void reg_tags(kp_reader *sub, uint32_t tag, kp_arena *a, kb_mrec *m)
{
    if (tag == 0 && m->version >= 3)
        m->u.reg.log_dirs = read_uuids(sub, a);
}

static void decode_register_broker(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_register_broker *p = &m->u.reg;
    p->broker_id = kp_read_i32(r);
    if (m->version >= 2)
        (void)kp_read_bool(r); /* IsMigratingZkBroker */
    p->incarnation_id = kp_read_uuid(r);
    p->broker_epoch = kp_read_i64(r);
    p->n_endpoints = read_count(r, 6);
    p->endpoints = arena_array(r, a, p->n_endpoints, sizeof(*p->endpoints));
    for (int32_t i = 0; i < p->n_endpoints && r->err == KP_ERR_NONE; i++) {
        p->endpoints[i].name = read_str(r);
        p->endpoints[i].host = read_str(r);
        p->endpoints[i].port = kp_read_u16(r);
        p->endpoints[i].security_protocol = kp_read_i16(r);
        kp_skip_tags(r);
    }
    int32_t nfeat = read_count(r, 6);
    for (int32_t i = 0; i < nfeat && r->err == KP_ERR_NONE; i++) {
        (void)read_str(r);
        (void)kp_read_i16(r);
        (void)kp_read_i16(r);
        kp_skip_tags(r);
    }
    p->rack = read_str(r);
    p->fenced = kp_read_bool(r);
    if (m->version >= 1)
        p->in_controlled_shutdown = kp_read_bool(r);
    p->log_dirs = (kb_uuids){-1, NULL};
    read_tags(r, a, m, reg_tags);
}

static kp_err read_i8_tag(kp_reader *sub, int8_t *out)
{
    *out = kp_read_i8(sub);
    return sub->err;
}

static void broker_change_tags(kp_reader *sub, uint32_t tag, kp_arena *a, kb_mrec *m)
{
    (void)a;
    if (tag == 0)
        (void)read_i8_tag(sub, &m->u.broker.fenced);
    else if (tag == 1 && m->version >= 1)
        (void)read_i8_tag(sub, &m->u.broker.in_controlled_shutdown);
}

/* BrokerRegistrationChange, Fence, Unfence and Unregister: id, epoch. */
static void decode_broker_change(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    m->u.broker.broker_id = kp_read_i32(r);
    m->u.broker.broker_epoch = kp_read_i64(r);
    m->u.broker.fenced = 0;
    m->u.broker.in_controlled_shutdown = 0;
    read_tags(r, a, m, m->type == KB_MREC_BROKER_REGISTRATION_CHANGE ? broker_change_tags : NULL);
}

static void partition_tags(kp_reader *sub, uint32_t tag, kp_arena *a, kb_mrec *m)
{
    kb_mrec_partition *p = &m->u.part;
    if (tag == 0)
        p->leader_recovery_state = kp_read_i8(sub);
    else if (tag == 1 && m->version >= 2)
        p->elr = read_i32s(sub, a);
    else if (tag == 2 && m->version >= 2)
        p->last_known_elr = read_i32s(sub, a);
}

static void partition_init(kb_mrec_partition *p)
{
    static const kb_i32s none = {-1, NULL};
    p->replicas = p->isr = p->removing = p->adding = p->elr = p->last_known_elr = none;
    p->directories = (kb_uuids){-1, NULL};
    p->leader = -1;
    p->leader_recovery_state = 0;
    p->leader_epoch = -1;
    p->partition_epoch = -1;
}

static void decode_partition(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_partition *p = &m->u.part;
    partition_init(p);
    p->partition_id = kp_read_i32(r);
    p->topic_id = kp_read_uuid(r);
    p->replicas = read_i32s(r, a);
    p->isr = read_i32s(r, a);
    p->removing = read_i32s(r, a);
    p->adding = read_i32s(r, a);
    p->leader = kp_read_i32(r);
    p->leader_epoch = kp_read_i32(r);
    p->partition_epoch = kp_read_i32(r);
    if (m->version >= 1)
        p->directories = read_uuids(r, a);
    if (r->err == KP_ERR_NONE && (p->replicas.n < 0 || p->isr.n < 0))
        kp_reader_fail(r, KP_ERR__MALFORMED);
    read_tags(r, a, m, partition_tags);
}

static void change_tags(kp_reader *sub, uint32_t tag, kp_arena *a, kb_mrec *m)
{
    kb_mrec_partition *p = &m->u.part;
    switch (tag) {
    case 0: p->isr = read_i32s(sub, a); break;
    case 1: p->leader = kp_read_i32(sub); break;
    case 2: p->replicas = read_i32s(sub, a); break;
    case 3: p->removing = read_i32s(sub, a); break;
    case 4: p->adding = read_i32s(sub, a); break;
    case 5: p->leader_recovery_state = kp_read_i8(sub); break;
    case 6: if (m->version >= 2) p->elr = read_i32s(sub, a); break;
    case 7: if (m->version >= 2) p->last_known_elr = read_i32s(sub, a); break;
    case 8: if (m->version >= 1) p->directories = read_uuids(sub, a); break;
    default: break;
    }
}

static void decode_partition_change(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_partition *p = &m->u.part;
    partition_init(p);
    p->leader = -2;
    p->leader_recovery_state = -1;
    p->partition_id = kp_read_i32(r);
    p->topic_id = kp_read_uuid(r);
    read_tags(r, a, m, change_tags);
}

static void decode_topic(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    if (m->type == KB_MREC_TOPIC)
        m->u.topic.name = read_str(r);
    m->u.topic.id = kp_read_uuid(r);
    read_tags(r, a, m, NULL);
}

static void decode_config(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    m->u.config.resource_type = kp_read_i8(r);
    m->u.config.resource_name = read_str(r);
    m->u.config.name = read_str(r);
    m->u.config.value = read_str(r);
    read_tags(r, a, m, NULL);
}

static void decode_feature(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    m->u.feature.name = read_str(r);
    m->u.feature.level = kp_read_i16(r);
    read_tags(r, a, m, NULL);
}

static void decode_quota(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_quota *q = &m->u.quota;
    q->n_entity = read_count(r, 3);
    q->entity = arena_array(r, a, q->n_entity, sizeof(*q->entity));
    for (int32_t i = 0; i < q->n_entity && r->err == KP_ERR_NONE; i++) {
        q->entity[i].type = read_str(r);
        q->entity[i].name = read_str(r);
        kp_skip_tags(r);
    }
    q->key = read_str(r);
    q->value = kp_read_f64(r);
    q->remove = kp_read_bool(r);
    read_tags(r, a, m, NULL);
}

static void decode_producer_ids(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    m->u.pids.broker_id = kp_read_i32(r);
    m->u.pids.broker_epoch = kp_read_i64(r);
    m->u.pids.next_producer_id = kp_read_i64(r);
    read_tags(r, a, m, NULL);
}

static void decode_acl(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_acl *p = &m->u.acl;
    p->id = kp_read_uuid(r);
    if (m->type == KB_MREC_ACCESS_CONTROL_ENTRY) {
        p->resource_type = kp_read_i8(r);
        p->resource_name = read_str(r);
        p->pattern_type = kp_read_i8(r);
        p->principal = read_str(r);
        p->host = read_str(r);
        p->operation = kp_read_i8(r);
        p->permission_type = kp_read_i8(r);
    }
    read_tags(r, a, m, NULL);
}

static void decode_scram(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_scram *p = &m->u.scram;
    p->name = read_str(r);
    p->mechanism = kp_read_i8(r);
    if (m->type == KB_MREC_USER_SCRAM_CREDENTIAL) {
        p->salt = kp_read_bytes(r, true);
        p->stored_key = kp_read_bytes(r, true);
        p->server_key = kp_read_bytes(r, true);
        p->iterations = kp_read_i32(r);
    }
    read_tags(r, a, m, NULL);
}

static void decode_token(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    kb_mrec_token *p = &m->u.token;
    if (m->type == KB_MREC_DELEGATION_TOKEN) {
        p->owner = read_str(r);
        p->requester = read_str(r);
        int32_t n = read_count(r, 1);
        for (int32_t i = 0; i < n && r->err == KP_ERR_NONE; i++)
            (void)read_str(r); /* Renewers */
        p->issue_ms = kp_read_i64(r);
        p->max_ms = kp_read_i64(r);
        p->expiration_ms = kp_read_i64(r);
    }
    p->token_id = read_str(r);
    read_tags(r, a, m, NULL);
}

static void decode_clear_elr(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    m->u.clear_elr_topic = read_str(r);
    read_tags(r, a, m, NULL);
}

/* NoOp, EndTransaction and the rest whose bodies carry nothing applied
 * (Begin/AbortTransaction's tagged name, ZkMigrationState's state). */
static void decode_skip(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    if (m->type == KB_MREC_ZK_MIGRATION_STATE)
        (void)kp_read_i8(r);
    read_tags(r, a, m, NULL);
}

static void decode_controller(kp_reader *r, kp_arena *a, kb_mrec *m)
{
    (void)kp_read_i32(r); /* ControllerId */
    if (m->type == KB_MREC_REGISTER_CONTROLLER) {
        (void)kp_read_uuid(r);
        (void)kp_read_bool(r);
        int32_t n = read_count(r, 6);
        for (int32_t i = 0; i < n && r->err == KP_ERR_NONE; i++) {
            (void)read_str(r);
            (void)read_str(r);
            (void)kp_read_u16(r);
            (void)kp_read_i16(r);
            kp_skip_tags(r);
        }
        n = read_count(r, 6);
        for (int32_t i = 0; i < n && r->err == KP_ERR_NONE; i++) {
            (void)read_str(r);
            (void)kp_read_i16(r);
            (void)kp_read_i16(r);
            kp_skip_tags(r);
        }
    }
    read_tags(r, a, m, NULL);
}

typedef void body_fn(kp_reader *r, kp_arena *a, kb_mrec *m);

static body_fn *body_decoder(int type)
{
    switch (type) {
    case KB_MREC_REGISTER_BROKER: return decode_register_broker;
    case KB_MREC_UNREGISTER_BROKER:
    case KB_MREC_FENCE_BROKER:
    case KB_MREC_UNFENCE_BROKER:
    case KB_MREC_BROKER_REGISTRATION_CHANGE: return decode_broker_change;
    case KB_MREC_TOPIC:
    case KB_MREC_REMOVE_TOPIC: return decode_topic;
    case KB_MREC_PARTITION: return decode_partition;
    case KB_MREC_PARTITION_CHANGE: return decode_partition_change;
    case KB_MREC_CONFIG: return decode_config;
    case KB_MREC_FEATURE_LEVEL: return decode_feature;
    case KB_MREC_CLIENT_QUOTA: return decode_quota;
    case KB_MREC_PRODUCER_IDS: return decode_producer_ids;
    case KB_MREC_ACCESS_CONTROL_ENTRY:
    case KB_MREC_REMOVE_ACCESS_CONTROL_ENTRY: return decode_acl;
    case KB_MREC_USER_SCRAM_CREDENTIAL:
    case KB_MREC_REMOVE_USER_SCRAM_CREDENTIAL: return decode_scram;
    case KB_MREC_DELEGATION_TOKEN:
    case KB_MREC_REMOVE_DELEGATION_TOKEN: return decode_token;
    case KB_MREC_CLEAR_ELR: return decode_clear_elr;
    case KB_MREC_REGISTER_CONTROLLER:
    case KB_MREC_UNREGISTER_CONTROLLER: return decode_controller;
    default: return decode_skip;
    }
}

static kp_err finish(kp_reader *r)
{
    if (r->err == KP_ERR_NONE && kp_reader_left(r) != 0)
        return KP_ERR__MALFORMED;
    return r->err;
}

kp_err kb_mrec_decode(const kb_meta_record *rec, kp_arena *a, kb_mrec *out)
{
    memset(out, 0, sizeof(*out));
    out->type = rec->type;
    out->version = rec->version;
    if (rec->control || rec->version < 0 || rec->version > kb_mrec_max_version(rec->type))
        return KP_ERR__INVAL;
    kp_reader r = kp_reader_make(rec->value.p, rec->value.len > 0 ? (size_t)rec->value.len : 0);
    (void)kp_read_uvarint(&r); /* frame version, api key, version: known */
    (void)kp_read_uvarint(&r);
    (void)kp_read_uvarint(&r);
    body_decoder(rec->type)(&r, a, out);
    return finish(&r);
}

static int16_t ctrl_max_version(int type)
{
    switch (type) {
    case KB_CTRL_LEADER_CHANGE: return 1;
    case KB_CTRL_SNAPSHOT_HEADER:
    case KB_CTRL_SNAPSHOT_FOOTER:
    case KB_CTRL_KRAFT_VERSION:
    case KB_CTRL_VOTERS: return 0;
    default: return -1;
    }
}

static kp_err ctrl_decode(int type, kp_reader *r, kp_arena *a, int16_t v)
{
    switch (type) {
    case KB_CTRL_LEADER_CHANGE: {
        kp_leader_change_message m;
        return kp_leader_change_message_decode(r, a, &m, v);
    }
    case KB_CTRL_SNAPSHOT_HEADER: {
        kp_snapshot_header_record m;
        return kp_snapshot_header_record_decode(r, a, &m, v);
    }
    case KB_CTRL_SNAPSHOT_FOOTER: {
        kp_snapshot_footer_record m;
        return kp_snapshot_footer_record_decode(r, a, &m, v);
    }
    case KB_CTRL_KRAFT_VERSION: {
        kp_k_raft_version_record m;
        return kp_k_raft_version_record_decode(r, a, &m, v);
    }
    default: {
        kp_voters_record m;
        return kp_voters_record_decode(r, a, &m, v);
    }
    }
}

kp_err kb_ctrl_check(const kb_meta_record *rec, kp_arena *a, int16_t *version)
{
    *version = -1;
    int16_t max = ctrl_max_version(rec->type);
    if (!rec->control || max < 0 || rec->version != 0)
        return KP_ERR__INVAL;
    size_t len = rec->value.len > 0 ? (size_t)rec->value.len : 0;
    kp_reader peek = kp_reader_make(rec->value.p, len);
    int16_t v = kp_read_i16(&peek); /* every control body starts with Version */
    if (peek.err != KP_ERR_NONE)
        return peek.err;
    *version = v;
    if (v < 0 || v > max)
        return KP_ERR__INVAL;
    kp_reader r = kp_reader_make(rec->value.p, len);
    kp_err e = ctrl_decode(rec->type, &r, a, v);
    return e != KP_ERR_NONE ? e : finish(&r);
}
