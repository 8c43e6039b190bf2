/* The metadata image: records written as Kafka 4.4.0's controller writes
 * them (flexible bodies after the frame header), applied in order. */
#include <check.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_meta_image.h"
#include "kp_types.h"

static kp_writer w;
static int64_t next_offset;

static kp_uuid uuid_of(uint8_t b)
{
    kp_uuid u;
    memset(u.b, b, sizeof(u.b));
    return u;
}

static void begin(int type, int version)
{
    kp_writer_init(&w, 64);
    kp_write_uvarint(&w, 0); /* frame version */
    kp_write_uvarint(&w, (uint32_t)type);
    kp_write_uvarint(&w, (uint32_t)version);
}

static void str(const char *s)
{
    kp_write_str(&w, true, s != NULL ? kp_str_from(s) : KP_STR_NULL);
}

static void ints(int n, const int32_t *v)
{
    kp_write_array_len(&w, true, n);
    for (int i = 0; i < n; i++)
        kp_write_i32(&w, v[i]);
}

static void no_tags(void)
{
    kp_write_uvarint(&w, 0);
}

static kb_meta_record as_record(void)
{
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    kb_meta_record r = {.offset = next_offset++, .epoch = 1, .control = false};
    kp_reader rd = kp_reader_make(w.buf, w.len);
    (void)kp_read_uvarint(&rd);
    r.type = (int16_t)kp_read_uvarint(&rd);
    r.version = (int16_t)kp_read_uvarint(&rd);
    r.value = (kp_slice){w.buf, (int32_t)w.len};
    return r;
}

/* Applies what was written since begin() and frees it. */
static kp_err apply(kb_meta_image *img)
{
    kb_meta_record r = as_record();
    kp_err e = kb_meta_image_apply(img, &r);
    kp_writer_fini(&w);
    return e;
}

static void register_broker(int32_t id, int version, bool fenced)
{
    begin(KB_MREC_REGISTER_BROKER, version);
    kp_write_i32(&w, id);
    if (version >= 2)
        kp_write_bool(&w, false);
    kp_uuid inc = uuid_of((uint8_t)id);
    kp_write_uuid(&w, &inc);
    kp_write_i64(&w, 100 + id);
    kp_write_array_len(&w, true, 1);
    str("PLAINTEXT");
    str("127.0.0.1");
    kp_write_u16(&w, (uint16_t)(9090 + id));
    kp_write_i16(&w, 0);
    no_tags();
    kp_write_array_len(&w, true, 1);
    str("metadata.version");
    kp_write_i16(&w, 7);
    kp_write_i16(&w, 33);
    no_tags();
    str(id == 1 ? "rack-a" : NULL);
    kp_write_bool(&w, fenced);
    if (version >= 1)
        kp_write_bool(&w, false);
    if (version >= 3) { /* LogDirs, tag 0 */
        kp_write_uvarint(&w, 1);
        kp_write_tag_header(&w, 0, 1 + 16);
        kp_write_array_len(&w, true, 1);
        kp_uuid dir = uuid_of(0x40);
        kp_write_uuid(&w, &dir);
    } else {
        no_tags();
    }
}

static void topic(const char *name, uint8_t id)
{
    begin(KB_MREC_TOPIC, 0);
    str(name);
    kp_uuid u = uuid_of(id);
    kp_write_uuid(&w, &u);
    no_tags();
}

static void partition(uint8_t topic_id, int32_t p, int32_t leader, int version)
{
    begin(KB_MREC_PARTITION, version);
    kp_write_i32(&w, p);
    kp_uuid u = uuid_of(topic_id);
    kp_write_uuid(&w, &u);
    int32_t reps[] = {leader, leader + 1};
    ints(2, reps);
    ints(1, reps);
    ints(0, NULL);
    ints(0, NULL);
    kp_write_i32(&w, leader);
    kp_write_i32(&w, 0);
    kp_write_i32(&w, 0);
    if (version >= 1) {
        kp_write_array_len(&w, true, 2);
        kp_uuid d = uuid_of(0x40);
        kp_write_uuid(&w, &d);
        kp_write_uuid(&w, &d);
    }
    if (version >= 2) { /* EligibleLeaderReplicas, tag 1 */
        kp_write_uvarint(&w, 1);
        kp_write_tag_header(&w, 1, 1 + 4);
        ints(1, &reps[1]);
    } else {
        no_tags();
    }
}

static void config(int8_t type, const char *res, const char *name, const char *value)
{
    begin(KB_MREC_CONFIG, 0);
    kp_write_i8(&w, type);
    str(res);
    str(name);
    str(value);
    no_tags();
}

typedef struct heard {
    int partitions, removed, configs;
    int32_t last_partition;
} heard;

static void listen(void *arg, kb_mi_event_kind kind, const kb_mi_topic *t, int32_t p)
{
    heard *h = arg;
    ck_assert_ptr_nonnull(t);
    if (kind == KB_MI_PARTITION) {
        h->partitions++;
        h->last_partition = p;
    } else if (kind == KB_MI_TOPIC_REMOVED) {
        h->removed++;
    } else {
        h->configs++;
    }
}

START_TEST(test_image_brokers)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    register_broker(1, 1, true);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    register_broker(2, 3, true);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    const kb_mi_broker *b = kb_meta_image_broker(&img, 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b->epoch, 101);
    ck_assert_str_eq(b->rack, "rack-a");
    ck_assert(b->fenced);
    ck_assert_int_eq(b->n_endpoints, 1);
    ck_assert_str_eq(b->endpoints[0].listener, "PLAINTEXT");
    ck_assert_int_eq(b->endpoints[0].port, 9091);
    ck_assert_ptr_null(kb_meta_image_broker(&img, 2)->rack);

    begin(KB_MREC_UNFENCE_BROKER, 0);
    kp_write_i32(&w, 1);
    kp_write_i64(&w, 101);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert(!kb_meta_image_broker(&img, 1)->fenced);

    /* BrokerRegistrationChange v1: fence (1) and controlled shutdown */
    begin(KB_MREC_BROKER_REGISTRATION_CHANGE, 1);
    kp_write_i32(&w, 1);
    kp_write_i64(&w, 101);
    kp_write_uvarint(&w, 2);
    kp_write_tag_header(&w, 0, 1);
    kp_write_i8(&w, 1);
    kp_write_tag_header(&w, 1, 1);
    kp_write_i8(&w, 1);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert(kb_meta_image_broker(&img, 1)->fenced);
    ck_assert(kb_meta_image_broker(&img, 1)->in_controlled_shutdown);

    begin(KB_MREC_UNREGISTER_BROKER, 0);
    kp_write_i32(&w, 2);
    kp_write_i64(&w, 102);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_ptr_null(kb_meta_image_broker(&img, 2));
    ck_assert_int_eq(img.applied_offset, next_offset - 1);
    kb_meta_image_fini(&img);
}
END_TEST

START_TEST(test_image_topics_partitions_changes)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    heard h = {0};
    kb_meta_image_set_listener(&img, listen, &h);
    topic("orders", 7);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    partition(7, 0, 1, 0);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    partition(7, 1, 2, 2);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(h.partitions, 2);
    const kb_mi_topic *t = kb_meta_image_topic(&img, KP_STR_LIT("orders"));
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(t, kb_meta_image_topic_by_id(&img, uuid_of(7)));
    ck_assert_int_eq(t->n_parts, 2);
    ck_assert_int_eq(t->parts[1].leader, 2);
    ck_assert_int_eq(t->parts[1].replicas.n, 2);
    ck_assert_int_eq(t->parts[1].elr.n, 1);
    ck_assert_int_eq(t->parts[1].elr.v[0], 3);
    ck_assert_int_eq(t->parts[1].n_dirs, 2);

    /* a new leader and ISR: leader epoch and partition epoch move */
    begin(KB_MREC_PARTITION_CHANGE, 0);
    kp_write_i32(&w, 1);
    kp_uuid u = uuid_of(7);
    kp_write_uuid(&w, &u);
    kp_write_uvarint(&w, 2);
    kp_write_tag_header(&w, 0, 1 + 8);
    int32_t isr[] = {3, 2};
    ints(2, isr);
    kp_write_tag_header(&w, 1, 4);
    kp_write_i32(&w, 3);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    t = kb_meta_image_topic(&img, KP_STR_LIT("orders"));
    ck_assert_int_eq(t->parts[1].leader, 3);
    ck_assert_int_eq(t->parts[1].leader_epoch, 1);
    ck_assert_int_eq(t->parts[1].partition_epoch, 1);
    ck_assert_int_eq(t->parts[1].isr.n, 2);
    ck_assert_int_eq(h.last_partition, 1);

    /* an ISR-only change keeps the leader epoch */
    begin(KB_MREC_PARTITION_CHANGE, 0);
    kp_write_i32(&w, 1);
    kp_write_uuid(&w, &u);
    kp_write_uvarint(&w, 1);
    kp_write_tag_header(&w, 0, 1 + 4);
    ints(1, isr);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(t->parts[1].leader_epoch, 1);
    ck_assert_int_eq(t->parts[1].partition_epoch, 2);

    config(2, "orders", "retention.ms", "1000");
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_str_eq(kb_mi_config_get(&t->configs, "retention.ms"), "1000");
    config(2, "orders", "retention.ms", NULL);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_ptr_null(kb_mi_config_get(&t->configs, "retention.ms"));
    ck_assert_int_eq(h.configs, 2);

    /* a partition of a topic the image lacks: the log is corrupt */
    partition(9, 0, 1, 0);
    ck_assert_int_eq(apply(&img), KP_ERR__CORRUPT);
    topic("orders", 8); /* a second topic of the same name */
    ck_assert_int_eq(apply(&img), KP_ERR__CORRUPT);

    begin(KB_MREC_REMOVE_TOPIC, 0);
    kp_write_uuid(&w, &u);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(h.removed, 1);
    ck_assert_ptr_null(kb_meta_image_topic(&img, KP_STR_LIT("orders")));
    ck_assert_ptr_null(kb_meta_image_topic_by_id(&img, u));
    ck_assert_int_eq(img.topics.n, 0);
    kb_meta_image_fini(&img);
}
END_TEST

START_TEST(test_image_features_configs_security)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    begin(KB_MREC_FEATURE_LEVEL, 0);
    str("metadata.version");
    kp_write_i16(&w, 27);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(kb_meta_image_feature(&img, "metadata.version"), 27);
    ck_assert_int_eq(kb_meta_image_feature(&img, "group.version"), 0);

    config(4, "", "log.retention.ms", "5000");
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_str_eq(kb_meta_image_broker_config(&img, "", "log.retention.ms"), "5000");

    begin(KB_MREC_PRODUCER_IDS, 0);
    kp_write_i32(&w, 1);
    kp_write_i64(&w, 101);
    kp_write_i64(&w, 2000);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(img.next_producer_id, 2000);

    begin(KB_MREC_USER_SCRAM_CREDENTIAL, 0);
    str("alice");
    kp_write_i8(&w, 1);
    kp_write_bytes(&w, true, (kp_slice){(const uint8_t *)"salt", 4});
    kp_write_bytes(&w, true, (kp_slice){(const uint8_t *)"stored", 6});
    kp_write_bytes(&w, true, (kp_slice){(const uint8_t *)"server", 6});
    kp_write_i32(&w, 4096);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(img.scram.n, 1);
    ck_assert_int_eq(img.scram.v[0].iterations, 4096);
    ck_assert_int_eq(img.scram.v[0].salt_len, 4);

    begin(KB_MREC_ACCESS_CONTROL_ENTRY, 0);
    kp_uuid id = uuid_of(3);
    kp_write_uuid(&w, &id);
    kp_write_i8(&w, 2);
    str("orders");
    kp_write_i8(&w, 3);
    str("User:alice");
    str("*");
    kp_write_i8(&w, 3);
    kp_write_i8(&w, 3);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(img.acls.n, 1);
    ck_assert_str_eq(img.acls.v[0].principal, "User:alice");
    begin(KB_MREC_REMOVE_ACCESS_CONTROL_ENTRY, 0);
    kp_write_uuid(&w, &id);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(img.acls.n, 0);

    begin(KB_MREC_CLIENT_QUOTA, 0);
    kp_write_array_len(&w, true, 1);
    str("user");
    str(NULL);
    no_tags();
    str("producer_byte_rate");
    kp_write_f64(&w, 1024.0);
    kp_write_bool(&w, false);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    ck_assert_int_eq(img.quotas.n, 1);
    ck_assert_str_eq(img.quotas.v[0].entity, "user=<default>");
    ck_assert(img.quotas.v[0].value == 1024.0);

    begin(KB_MREC_NO_OP, 0);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    kb_meta_image_fini(&img);
}
END_TEST

START_TEST(test_image_refuses_unknown_type_and_version)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    begin(99, 0);
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR__INVAL);
    begin(13, 0); /* a key Kafka retired */
    no_tags();
    ck_assert_int_eq(apply(&img), KP_ERR__INVAL);
    partition(7, 0, 1, 0);
    kb_meta_record r = as_record();
    r.version = 3; /* newer than PartitionRecord v2 */
    ck_assert_int_eq(kb_meta_image_apply(&img, &r), KP_ERR__INVAL);
    kp_writer_fini(&w);
    ck_assert_int_eq(img.applied_offset, -1);
    ck_assert_str_eq(kb_mrec_name(KB_MREC_PARTITION), "PartitionRecord");
    ck_assert_str_eq(kb_mrec_name(99), "unknown");
    kb_meta_image_fini(&img);
}
END_TEST

/* Every truncation of every kind of body fails cleanly; so do trailing
 * bytes. */
START_TEST(test_image_hostile_bodies)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    topic("t", 7);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    for (int kind = 0; kind < 3; kind++) {
        if (kind == 0)
            register_broker(5, 3, false);
        else if (kind == 1)
            partition(7, 0, 1, 2);
        else
            config(2, "t", "a", "b");
        kb_meta_record full = as_record();
        for (int32_t cut = 3; cut < full.value.len; cut++) {
            kb_meta_record r = full;
            r.value.len = cut;
            ck_assert_int_ne(kb_meta_image_apply(&img, &r), KP_ERR_NONE);
        }
        kp_write_u16(&w, 0);
        kb_meta_record r = as_record();
        ck_assert_int_eq(kb_meta_image_apply(&img, &r), KP_ERR__MALFORMED);
        kp_writer_fini(&w);
    }
    ck_assert_ptr_null(kb_meta_image_broker(&img, 5));
    ck_assert_int_eq(kb_meta_image_topic(&img, KP_STR_LIT("t"))->n_parts, 0);
    /* a count far beyond the bytes left */
    begin(KB_MREC_PARTITION, 0);
    kp_write_i32(&w, 0);
    kp_uuid u = uuid_of(7);
    kp_write_uuid(&w, &u);
    kp_write_uvarint(&w, 1000000);
    ck_assert_int_ne(apply(&img), KP_ERR_NONE);
    kb_meta_image_fini(&img);
}
END_TEST

/* Random bodies under every known type and version, and random control
 * bodies: each fails or applies, never reads outside the body (ASan). */
START_TEST(test_image_random_bodies)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    topic("t", 7);
    ck_assert_int_eq(apply(&img), KP_ERR_NONE);
    uint32_t seed = 12345;
    uint8_t body[96];
    for (int round = 0; round < 20000; round++) {
        seed = seed * 1103515245u + 12345u;
        int type = (int)(seed >> 8) % 31;
        int16_t max = kb_mrec_max_version(type);
        size_t len = (seed >> 16) % sizeof(body);
        for (size_t i = 0; i < len; i++) {
            seed = seed * 1103515245u + 12345u;
            body[i] = (uint8_t)(seed >> 24);
        }
        kb_meta_record r = {.offset = round, .control = (round & 7) == 0,
                            .type = (int16_t)(type % 8), .version = 0,
                            .value = {body, (int32_t)len}};
        if (!r.control) {
            r.type = (int16_t)type;
            r.version = max >= 0 ? (int16_t)(round % (max + 1)) : 0;
            body[0] = 0; /* a frame header the batch reader already parsed */
            if (len > 2) {
                body[1] = (uint8_t)type;
                body[2] = (uint8_t)r.version;
            }
        }
        (void)kb_meta_image_apply(&img, &r);
    }
    kb_meta_image_fini(&img);
}
END_TEST

static kb_meta_record control(int16_t type, kp_writer *cw)
{
    kb_meta_record r = {.offset = 0, .control = true, .type = type, .version = 0};
    r.value = (kp_slice){cw->buf, (int32_t)cw->len};
    return r;
}

START_TEST(test_image_control_records)
{
    kb_meta_image img;
    kb_meta_image_init(&img);
    kp_writer cw;
    kp_writer_init(&cw, 32);
    kp_write_i16(&cw, 0); /* LeaderChangeMessage v0 */
    kp_write_i32(&cw, 3000);
    kp_write_array_len(&cw, true, 1);
    kp_write_i32(&cw, 3000);
    kp_write_uvarint(&cw, 0);
    kp_write_array_len(&cw, true, 0);
    kp_write_uvarint(&cw, 0);
    kb_meta_record r = control(KB_CTRL_LEADER_CHANGE, &cw);
    ck_assert_int_eq(kb_meta_image_apply(&img, &r), KP_ERR_NONE);
    r.type = 42;
    ck_assert_int_eq(kb_meta_image_apply(&img, &r), KP_ERR__INVAL);
    kp_writer_fini(&cw);
    kp_writer_init(&cw, 32);
    kp_write_i16(&cw, 7); /* SnapshotHeader of a version Runnel lacks */
    kp_write_i64(&cw, 0);
    kp_write_uvarint(&cw, 0);
    r = control(KB_CTRL_SNAPSHOT_HEADER, &cw);
    ck_assert_int_eq(kb_meta_image_apply(&img, &r), KP_ERR__INVAL);
    kp_writer_fini(&cw);
    kb_meta_image_fini(&img);
}
END_TEST

Suite *meta_image_suite(void)
{
    Suite *s = suite_create("meta_image");
    TCase *tc = tcase_create("image");
    tcase_add_test(tc, test_image_brokers);
    tcase_add_test(tc, test_image_topics_partitions_changes);
    tcase_add_test(tc, test_image_features_configs_security);
    tcase_add_test(tc, test_image_refuses_unknown_type_and_version);
    tcase_add_test(tc, test_image_hostile_bodies);
    tcase_add_test(tc, test_image_control_records);
    tcase_add_test(tc, test_image_random_bodies);
    suite_add_tcase(s, tc);
    return s;
}
