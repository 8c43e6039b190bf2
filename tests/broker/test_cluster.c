/* Cluster mode's pure parts: meta.properties (kb_meta_props), the quorum
 * settings (kb_quorum), the metadata log's batches (kb_meta_batches). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker_suites.h"
#include "kb_config.h"
#include "kb_meta_batches.h"
#include "kb_meta_props.h"
#include "kb_quorum.h"
#include "kb_uuid.h"
#include "kp_batch.h"
#include "kp_records.h"

#define CLUSTER_ID "MkU3OEVBNTcwNTJENDM2Qg"

static char errbuf[512];

/* A cluster-mode config with one log dir made for the test. */
static kb_config *config_with(const char *dir, const char *extra)
{
    char logdirs[600], voters[] = "controller.quorum.voters=3000@127.0.0.1:19401";
    snprintf(logdirs, sizeof logdirs, "log.dirs=%s", dir);
    char *argv[] = {"runnel", "--override", "process.roles=broker", "--override", "node.id=1",
                    "--override", voters, "--override", logdirs, "--override",
                    (char *)(extra ? extra : "broker.rack=r1"), NULL};
    char *envp[] = {NULL};
    kb_config *cfg = NULL;
    ck_assert_int_eq(kb_config_load(11, argv, envp, &cfg, errbuf, sizeof errbuf), KP_ERR_NONE);
    return cfg;
}

static char *temp_dir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/kt-cluster-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    return dir;
}

static void write_file(const char *dir, const char *text)
{
    char path[600];
    snprintf(path, sizeof path, "%s/meta.properties", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

START_TEST(test_meta_props_reads_kafkas_file)
{
    char *dir = temp_dir();
    write_file(dir, "#\n#Thu Dec 03 07:35:25 UTC 2026\nnode.id=1\n"
                    "directory.id=00MlU01bHrQCZjN7LVMHSA\nversion=1\ncluster.id=" CLUSTER_ID "\n");
    kb_config *cfg = config_with(dir, NULL);
    ck_assert(kb_config_cluster_mode(cfg));
    kb_meta_props ids;
    kp_uuid dirs[4];
    ck_assert_int_eq(kb_meta_props_check_all(cfg, &ids, dirs, 4, errbuf, sizeof errbuf),
                     KP_ERR_NONE);
    ck_assert_str_eq(ids.cluster_id, CLUSTER_ID);
    char back[23];
    kb_uuid_format(&dirs[0], back);
    ck_assert_str_eq(back, "00MlU01bHrQCZjN7LVMHSA");
    kb_config_free(cfg);
}
END_TEST

START_TEST(test_meta_props_mismatches_name_both_values)
{
    char *dir = temp_dir();
    write_file(dir, "node.id=2\ndirectory.id=00MlU01bHrQCZjN7LVMHSA\nversion=1\n"
                    "cluster.id=" CLUSTER_ID "\n");
    kb_config *cfg = config_with(dir, NULL);
    kb_meta_props ids;
    kp_uuid dirs[4];
    ck_assert_int_eq(kb_meta_props_check_all(cfg, &ids, dirs, 4, errbuf, sizeof errbuf),
                     KP_ERR__INVAL);
    ck_assert_ptr_nonnull(strstr(errbuf, "node id 2"));
    ck_assert_ptr_nonnull(strstr(errbuf, "node.id 1"));
    kb_config_free(cfg);
    cfg = config_with(dir, "cluster.id=AAAAAAAAAAAAAAAAAAAAAQ");
    write_file(dir, "node.id=1\ndirectory.id=00MlU01bHrQCZjN7LVMHSA\nversion=1\n"
                    "cluster.id=" CLUSTER_ID "\n");
    ck_assert_int_eq(kb_meta_props_check_all(cfg, &ids, dirs, 4, errbuf, sizeof errbuf),
                     KP_ERR__INVAL);
    ck_assert_ptr_nonnull(strstr(errbuf, "AAAAAAAAAAAAAAAAAAAAAQ"));
    ck_assert_ptr_nonnull(strstr(errbuf, CLUSTER_ID));
    write_file(dir, "node.id=1\nversion=0\ncluster.id=" CLUSTER_ID "\n");
    ck_assert_int_eq(kb_meta_props_check_all(cfg, &ids, dirs, 4, errbuf, sizeof errbuf),
                     KP_ERR__INVAL);
    kb_config_free(cfg);
}
END_TEST

START_TEST(test_meta_props_format_then_check)
{
    char *dir = temp_dir();
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    kb_config *cfg = config_with(sub, NULL);
    kb_meta_props ids;
    kp_uuid dirs[4];
    ck_assert_int_eq(kb_meta_props_check_all(cfg, &ids, dirs, 4, errbuf, sizeof errbuf),
                     KP_ERR__NOENT);
    ck_assert_ptr_nonnull(strstr(errbuf, "No `meta.properties` found"));
    ck_assert_int_eq(kb_meta_props_format(cfg, CLUSTER_ID, errbuf, sizeof errbuf), KP_ERR_NONE);
    ck_assert_int_eq(kb_meta_props_check_all(cfg, &ids, dirs, 4, errbuf, sizeof errbuf),
                     KP_ERR_NONE);
    ck_assert(!kp_uuid_is_zero(&dirs[0]));
    /* again: the same cluster is fine, another is refused */
    ck_assert_int_eq(kb_meta_props_format(cfg, CLUSTER_ID, errbuf, sizeof errbuf), KP_ERR_NONE);
    ck_assert_int_eq(kb_meta_props_format(cfg, "AAAAAAAAAAAAAAAAAAAAAQ", errbuf, sizeof errbuf),
                     KP_ERR__INVAL);
    ck_assert_int_eq(kb_meta_props_format(cfg, "not-an-id", errbuf, sizeof errbuf),
                     KP_ERR__INVAL);
    kb_config_free(cfg);
}
END_TEST

START_TEST(test_uuid_parse_round_trip)
{
    for (int i = 0; i < 64; i++) {
        kp_uuid u, back;
        char s[23];
        kb_uuid_random(&u);
        kb_uuid_format(&u, s);
        ck_assert(kb_uuid_parse(s, &back));
        ck_assert_mem_eq(u.b, back.b, 16);
    }
    kp_uuid u;
    ck_assert(!kb_uuid_parse("AAAAAAAAAAAAAAAAAAAAAB", &u)); /* spare bits set */
    ck_assert(!kb_uuid_parse("AAAAAAAAAAAAAAAAAAAA*Q", &u));
    ck_assert(!kb_uuid_parse("AAAA", &u));
}
END_TEST

START_TEST(test_quorum_voters_and_leader)
{
    char *dir = temp_dir();
    kb_config *cfg = config_with(dir, "controller.quorum.voters=1@h1:9093,2@[::1]:9094");
    kb_quorum q;
    ck_assert_int_eq(kb_quorum_parse(cfg, &q, errbuf, sizeof errbuf), KP_ERR_NONE);
    ck_assert_uint_eq(q.n, 2);
    ck_assert_int_eq(q.v[1].id, 2);
    ck_assert_str_eq(q.v[1].host, "::1");
    ck_assert_uint_eq(q.v[1].port, 9094);
    ck_assert_int_eq(kb_quorum_pick(&q), 0); /* no leader: rotate */
    ck_assert_int_eq(kb_quorum_pick(&q), 1);
    ck_assert_int_eq(kb_quorum_pick(&q), 0);
    ck_assert(kb_quorum_learn(&q, 2, 5, NULL, 0));
    ck_assert_int_eq(kb_quorum_pick(&q), 1);
    ck_assert(!kb_quorum_learn(&q, 1, 4, NULL, 0)); /* an older epoch */
    ck_assert(kb_quorum_learn(&q, 7, 6, "h7", 9097)); /* a leader from NodeEndpoints */
    char addr[300];
    ck_assert_str_eq(kb_quorum_addr(&q, kb_quorum_pick(&q), addr, sizeof addr), "h7:9097");
    ck_assert_str_eq(kb_quorum_addr(&q, 1, addr, sizeof addr), "[::1]:9094");
    ck_assert_str_eq(kb_quorum_addr(&q, -1, addr, sizeof addr), "none");
    kb_quorum_fini(&q);
    kb_config_free(cfg);
    cfg = config_with(dir, "controller.quorum.voters=h1:9093");
    ck_assert_int_eq(kb_quorum_parse(cfg, &q, errbuf, sizeof errbuf), KP_ERR__INVAL);
    ck_assert_ptr_nonnull(strstr(errbuf, "controller.quorum.voters=h1:9093"));
    kb_quorum_fini(&q);
    kb_config_free(cfg);
}
END_TEST

typedef struct seen {
    int n;
    int64_t offsets[8];
    bool control[8];
    int16_t type[8];
} seen;

static void collect(void *arg, const kb_meta_record *rec)
{
    seen *s = arg;
    ck_assert_int_lt(s->n, 8);
    s->offsets[s->n] = rec->offset;
    s->control[s->n] = rec->control;
    s->type[s->n++] = rec->type;
}

/* One batch at base with count records; metadata values are frame 1, type,
 * version 0; control keys are version 0, type. */
static uint8_t *batch(int64_t base, bool control, int count, int16_t type, size_t *len)
{
    kp_batch_builder b;
    kp_batch_builder_init(&b, base, control ? KP_BATCH_ATTR_CONTROL : 0, -1, -1, -1);
    uint8_t meta[3] = {1, (uint8_t)type, 0}, key[4] = {0, 0, 0, (uint8_t)type};
    for (int i = 0; i < count; i++) {
        kp_slice k = control ? (kp_slice){key, 4} : (kp_slice){NULL, -1};
        kp_slice v = {meta, 3};
        kp_batch_builder_add(&b, 1000, k, v, NULL, 0);
    }
    uint8_t *p = kp_batch_builder_finish(&b, len);
    kp_batch_set_leader_epoch(p, 3);
    return p;
}

START_TEST(test_meta_batches_records_in_order)
{
    size_t l1, l2;
    uint8_t *b1 = batch(0, true, 1, 2, &l1);   /* LeaderChange */
    uint8_t *b2 = batch(1, false, 3, 12, &l2); /* three RegisterBrokerRecords */
    uint8_t *all = malloc(l1 + l2);
    memcpy(all, b1, l1);
    memcpy(all + l1, b2, l2);
    kb_meta_pos pos = {0, 0};
    seen s = {0};
    int64_t n;
    /* cut inside the second batch: only the first is read */
    ck_assert_int_eq(kb_meta_batches_read(all, l1 + l2 - 5, &pos, collect, &s, &n), KP_ERR_NONE);
    ck_assert_int_eq(n, 1);
    ck_assert_int_eq(pos.next_offset, 1);
    ck_assert(s.control[0]);
    ck_assert_int_eq(s.type[0], 2);
    ck_assert_int_eq(pos.last_epoch, 3);
    /* whole: the first batch is not delivered again */
    ck_assert_int_eq(kb_meta_batches_read(all, l1 + l2, &pos, collect, &s, &n), KP_ERR_NONE);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(s.n, 4);
    ck_assert_int_eq(s.offsets[3], 3);
    ck_assert(!s.control[3]);
    ck_assert_int_eq(s.type[3], 12);
    ck_assert_int_eq(pos.next_offset, 4);
    /* a flipped byte fails the CRC: nothing of that batch is delivered */
    pos = (kb_meta_pos){0, 0};
    all[l1 + 70] ^= 1;
    s.n = 0;
    ck_assert_int_eq(kb_meta_batches_read(all, l1 + l2, &pos, collect, &s, &n), KP_ERR__CORRUPT);
    ck_assert_int_eq(s.n, 1);
    free(b1);
    free(b2);
    free(all);
}
END_TEST

Suite *cluster_suite(void)
{
    Suite *s = suite_create("cluster");
    TCase *tc = tcase_create("cluster");
    tcase_add_test(tc, test_meta_props_reads_kafkas_file);
    tcase_add_test(tc, test_meta_props_mismatches_name_both_values);
    tcase_add_test(tc, test_meta_props_format_then_check);
    tcase_add_test(tc, test_uuid_parse_round_trip);
    tcase_add_test(tc, test_quorum_voters_and_leader);
    tcase_add_test(tc, test_meta_batches_records_in_order);
    suite_add_tcase(s, tc);
    return s;
}
