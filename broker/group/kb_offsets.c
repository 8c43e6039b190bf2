#include "kb_offsets.h"

#include <stdlib.h>
#include <string.h>

/* ---- the map ------------------------------------------------------------ */

typedef struct offset_key {
    kp_str topic;
    int32_t partition;
} offset_key;

static uint64_t key_hash(kp_str topic, int32_t partition)
{
    uint64_t h = kb_map_hash_str(topic);
    return kb_map_hash_more(h, &partition, sizeof partition);
}

static bool offset_is(const void *entry, const void *key)
{
    const kb_offset *o = entry;
    const offset_key *k = key;
    return o->partition == k->partition && kp_cstr_is(o->topic, k->topic);
}

kp_str kb_offset_metadata(const kb_offset *o)
{
    if (o->metadata == NULL || o->metadata_len <= 0)
        return KP_STR_LIT("");
    return (kp_str){o->metadata, o->metadata_len};
}

char *kb_offset_metadata_dup(const kb_offset *o)
{
    kp_str m = kb_offset_metadata(o);
    char *s = malloc((size_t)m.len + 1);
    if (s != NULL) {
        memcpy(s, m.p, (size_t)m.len);
        s[m.len] = '\0';
    }
    return s;
}

void kb_offset_map_init(kb_offset_map *m)
{
    kb_map_init(&m->entries);
}

static void entry_free(kb_offset *o)
{
    free(o->topic);
    free(o->metadata);
    free(o);
}

void kb_offset_map_fini(kb_offset_map *m)
{
    size_t cursor = 0;
    for (kb_offset *o; (o = kb_map_next(&m->entries, &cursor)) != NULL;)
        entry_free(o);
    kb_map_fini(&m->entries);
}

const kb_offset *kb_offset_map_get(const kb_offset_map *m, kp_str topic, int32_t partition)
{
    offset_key k = {topic, partition};
    return kb_map_find(&m->entries, key_hash(topic, partition), &k, offset_is);
}

kp_err kb_offset_map_put(kb_offset_map *m, const kb_offset *o)
{
    kp_str topic = kp_str_from(o->topic);
    uint64_t h = key_hash(topic, o->partition);
    offset_key k = {topic, o->partition};
    kb_offset *s = kb_map_find(&m->entries, h, &k, offset_is);
    char *meta = kb_offset_metadata_dup(o);
    if (meta == NULL)
        return KP_ERR__NOMEM;
    if (s == NULL) {
        s = calloc(1, sizeof(*s));
        char *name = strdup(o->topic);
        if (s == NULL || name == NULL || kb_map_insert(&m->entries, h, s) != KP_ERR_NONE) {
            free(s);
            free(name);
            free(meta);
            return KP_ERR__NOMEM;
        }
        s->topic = name;
    }
    char *name = s->topic;
    free(s->metadata);
    *s = *o;
    s->topic = name;
    s->metadata = meta;
    s->metadata_len = kb_offset_metadata(o).len;
    return KP_ERR_NONE;
}

bool kb_offset_map_del(kb_offset_map *m, kp_str topic, int32_t partition)
{
    offset_key k = {topic, partition};
    kb_offset *o = kb_map_remove(&m->entries, key_hash(topic, partition), &k, offset_is);
    if (o != NULL)
        entry_free(o);
    return o != NULL;
}

const kb_offset *kb_offset_map_next(const kb_offset_map *m, size_t *cursor)
{
    return kb_map_next(&m->entries, cursor);
}

/* ---- partition mapping -------------------------------------------------- */

/* Decodes one UTF-8 sequence at s[*i] (advancing *i); an invalid byte
 * counts as U+FFFD, as Java's decoder replaces it. */
static uint32_t utf8_next(kp_str s, int32_t *i)
{
    uint8_t c = (uint8_t)s.p[(*i)++];
    int extra = c >= 0xF0 && c < 0xF8 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
    if (c >= 0x80 && extra == 0)
        return 0xFFFD;
    uint32_t cp = extra == 0 ? c : (uint32_t)(c & (0x3F >> extra));
    for (int k = 0; k < extra; k++) {
        if (*i >= s.len || ((uint8_t)s.p[*i] & 0xC0) != 0x80)
            return 0xFFFD;
        cp = (cp << 6) | ((uint8_t)s.p[(*i)++] & 0x3F);
    }
    return cp;
}

int32_t kb_offsets_partition_for(kp_str group_id, int32_t partitions)
{
    uint32_t h = 0;
    for (int32_t i = 0; i < group_id.len;) {
        uint32_t cp = utf8_next(group_id, &i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = h * 31 + (0xD800 + (cp >> 10));
            h = h * 31 + (0xDC00 + (cp & 0x3FF));
        } else {
            h = h * 31 + cp;
        }
    }
    int32_t sh = (int32_t)h;
    int32_t abs = sh == INT32_MIN ? 0 : (sh < 0 ? -sh : sh);
    return partitions > 0 ? abs % partitions : 0;
}

/* ---- record bytes ------------------------------------------------------- */

void kb_offsets_write_commit_key(kp_writer *w, kp_str group, kp_str topic, int32_t partition)
{
    kp_offset_commit_key k = {.group = group, .topic = topic, .partition = partition};
    kp_write_i16(w, KB_OFFSETS_COMMIT_KEY_VERSION);
    kp_offset_commit_key_encode(w, &k, KB_OFFSETS_COMMIT_KEY_VERSION);
}

void kb_offsets_write_commit_value(kp_writer *w, const kb_offset *o)
{
    kp_offset_commit_value v = {
        .offset = o->offset,
        .leader_epoch = o->leader_epoch,
        .metadata = kb_offset_metadata(o),
        .commit_timestamp = o->commit_ts,
        .expire_timestamp = o->expire_ts,
    };
    int16_t version =
        o->expire_ts >= 0 ? KB_OFFSETS_COMMIT_VALUE_EXPIRE_V : KB_OFFSETS_COMMIT_VALUE_VERSION;
    kp_write_i16(w, version);
    kp_offset_commit_value_encode(w, &v, version);
}

void kb_offsets_write_group_key(kp_writer *w, kp_str group)
{
    kp_group_metadata_key k = {.group = group};
    kp_write_i16(w, KB_OFFSETS_GROUP_KEY_VERSION);
    kp_group_metadata_key_encode(w, &k, KB_OFFSETS_GROUP_KEY_VERSION);
}

void kb_offsets_write_group_value(kp_writer *w, const kp_group_metadata_value *v)
{
    kp_write_i16(w, KB_OFFSETS_GROUP_VALUE_VERSION);
    kp_group_metadata_value_encode(w, v, KB_OFFSETS_GROUP_VALUE_VERSION);
}

void kb_offsets_write_cgroup_key(kp_writer *w, kp_str group)
{
    kb_offsets_write_cg_key(w, KB_OFFSETS_CGROUP_KEY_VERSION, group, KP_STR_NULL);
}

void kb_offsets_write_cg_key(kp_writer *w, int16_t type, kp_str group, kp_str member)
{
    kp_write_i16(w, type);
    if (type == KB_OFFSETS_CGROUP_KEY_VERSION || type == KB_OFFSETS_CG_TARGET_EPOCH_KEY) {
        kp_consumer_group_metadata_key k = {.group_id = group};
        kp_consumer_group_metadata_key_encode(w, &k, KB_OFFSETS_CGROUP_KEY_VERSION);
    } else {
        kp_consumer_group_member_metadata_key k = {.group_id = group, .member_id = member};
        kp_consumer_group_member_metadata_key_encode(w, &k, KB_OFFSETS_CG_MEMBER_KEY);
    }
}

void kb_offsets_write_cgroup_value(kp_writer *w, int32_t epoch)
{
    kp_consumer_group_metadata_value v = {.epoch = epoch};
    kp_write_i16(w, 0);
    kp_consumer_group_metadata_value_encode(w, &v, 0);
}

/* A reader over the struct after the version; false if too short. */
bool kb_offsets_read_version(kp_slice s, kp_reader *r, int16_t *version)
{
    if (s.len < 2)
        return false;
    *r = kp_reader_make(s.p, (size_t)s.len);
    *version = kp_read_i16(r);
    return true;
}

/* The KIP-848 group keys (versions 3, 5-8; 4 is skipped): group and member. */
static kp_err read_cgroup_key(kp_reader *r, kp_arena *a, int16_t version, kb_offsets_key *out)
{
    kp_err e = KP_ERR__NOENT;
    out->member = KP_STR_NULL;
    if (version == KB_OFFSETS_CGROUP_KEY_VERSION || version == KB_OFFSETS_CG_TARGET_EPOCH_KEY) {
        kp_consumer_group_metadata_key k; /* both are {GroupId} */
        e = kp_consumer_group_metadata_key_decode(r, a, &k, KB_OFFSETS_CGROUP_KEY_VERSION);
        out->group = k.group_id;
    } else if (version != 4) {
        kp_consumer_group_member_metadata_key k; /* 5, 7, 8 are {GroupId, MemberId} */
        e = kp_consumer_group_member_metadata_key_decode(r, a, &k, KB_OFFSETS_CG_MEMBER_KEY);
        out->group = k.group_id;
        out->member = k.member_id;
        if (e == KP_ERR_NONE && k.member_id.len <= 0)
            e = KP_ERR__CORRUPT;
    }
    if (e != KP_ERR_NONE)
        return e == KP_ERR__NOENT ? e : KP_ERR__CORRUPT;
    if (out->group.len < 0)
        return KP_ERR__CORRUPT;
    out->type = KB_OFFSETS_KEY_CGROUP;
    out->cg_type = version;
    return KP_ERR_NONE;
}

kp_err kb_offsets_read_key(kp_slice key, kp_arena *a, kb_offsets_key *out)
{
    kp_reader r;
    int16_t version;
    memset(out, 0, sizeof(*out));
    if (!kb_offsets_read_version(key, &r, &version))
        return KP_ERR__CORRUPT;
    if (version == 0 || version == 1) {
        kp_offset_commit_key k;
        if (kp_offset_commit_key_decode(&r, a, &k, version) != KP_ERR_NONE || k.group.len < 0 ||
            k.topic.len < 0)
            return KP_ERR__CORRUPT;
        out->type = KB_OFFSETS_KEY_COMMIT;
        out->group = k.group;
        out->topic = k.topic;
        out->partition = k.partition;
        return KP_ERR_NONE;
    }
    if (version == 2) {
        kp_group_metadata_key k;
        if (kp_group_metadata_key_decode(&r, a, &k, version) != KP_ERR_NONE || k.group.len < 0)
            return KP_ERR__CORRUPT;
        out->type = KB_OFFSETS_KEY_GROUP;
        out->group = k.group;
        return KP_ERR_NONE;
    }
    if (version >= KB_OFFSETS_CGROUP_KEY_VERSION && version <= KB_OFFSETS_CG_CURRENT_KEY)
        return read_cgroup_key(&r, a, version, out);
    return version > 2 ? KP_ERR__NOENT : KP_ERR__CORRUPT;
}

kp_err kb_offsets_read_cgroup_value(kp_slice value, kp_arena *a, int32_t *epoch)
{
    kp_reader r;
    int16_t version;
    kp_consumer_group_metadata_value v;
    kp_consumer_group_metadata_value_defaults(&v);
    if (!kb_offsets_read_version(value, &r, &version) || version != 0 ||
        kp_consumer_group_metadata_value_decode(&r, a, &v, version) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    *epoch = v.epoch;
    return KP_ERR_NONE;
}

kp_err kb_offsets_read_commit_value(kp_slice value, kp_arena *a, kb_offset *o)
{
    kp_reader r;
    int16_t version;
    if (!kb_offsets_read_version(value, &r, &version) || version < 0 || version > 4)
        return KP_ERR__CORRUPT;
    kp_offset_commit_value v;
    kp_offset_commit_value_defaults(&v);
    if (kp_offset_commit_value_decode(&r, a, &v, version) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    memset(o, 0, sizeof(*o));
    o->offset = v.offset;
    o->leader_epoch = v.leader_epoch;
    int32_t mlen = v.metadata.len > 0 ? v.metadata.len : 0;
    o->metadata = kp_arena_strdup(a, mlen > 0 ? v.metadata.p : "", (size_t)mlen);
    o->metadata_len = mlen;
    o->commit_ts = v.commit_timestamp;
    o->expire_ts = version == 1 ? v.expire_timestamp : -1;
    return o->metadata != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
}

kp_err kb_offsets_read_group_value(kp_slice value, kp_arena *a, kp_group_metadata_value *out)
{
    kp_reader r;
    int16_t version;
    if (!kb_offsets_read_version(value, &r, &version) || version < 0 || version > 4)
        return KP_ERR__CORRUPT;
    kp_group_metadata_value_defaults(out);
    if (kp_group_metadata_value_decode(&r, a, out, version) != KP_ERR_NONE)
        return KP_ERR__CORRUPT;
    return KP_ERR_NONE;
}
