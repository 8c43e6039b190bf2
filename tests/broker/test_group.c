/* Unit tests of kb_group (the classic group state machine, driven by events
 * on a fake clock) and kb_offsets (the offset map, Kafka's record bytes and
 * the group-to-partition mapping). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_group.h"
#include "kb_offsets.h"

#define SESSION   10000
#define REBALANCE 30000
#define DELAY     3000

/* One request waiting on the state machine, and what it was answered. */
typedef struct tw {
    bool answered;
    kp_err err;
    char member_id[128];
    char leader[128];
    int32_t generation;
    int32_t nmembers; /* the leader's member list */
    bool skip;
    char assignment[64];
} tw;

static int64_t fake_wall = 1700000000000;
static int uuid_seq;
static int stores;
static kp_err store_result;

static void t_join_done(void *w, const kb_group *g, const kb_group_join_result *res, void *ctx)
{
    (void)ctx;
    tw *t = w;
    ck_assert(!t->answered);
    t->answered = true;
    t->err = res->err;
    t->generation = res->generation;
    t->skip = res->skip_assignment;
    snprintf(t->member_id, sizeof(t->member_id), "%s", res->member_id ? res->member_id : "");
    snprintf(t->leader, sizeof(t->leader), "%s", res->leader ? res->leader : "");
    t->nmembers = res->with_members ? g->nmembers : -1;
}

static void t_sync_done(void *w, const kb_group *g, kp_err err, kp_slice a, void *ctx)
{
    (void)ctx;
    (void)g;
    tw *t = w;
    ck_assert(!t->answered);
    t->answered = true;
    t->err = err;
    snprintf(t->assignment, sizeof(t->assignment), "%.*s", a.len, (const char *)a.p);
}

static kp_err t_store(kb_group *g, void *ctx)
{
    (void)g;
    (void)ctx;
    stores++;
    return store_result;
}

static void t_uuid(char out[37], void *ctx)
{
    (void)ctx;
    snprintf(out, 37, "uuid-%d", ++uuid_seq);
}

static int64_t t_wall(void *ctx)
{
    (void)ctx;
    return fake_wall;
}

static kb_groups *gs;

static void setup(void)
{
    kb_group_env env = {t_join_done, t_sync_done, t_store, t_uuid, t_wall, NULL, DELAY, 6000,
                        300000, 3};
    uuid_seq = 0;
    stores = 0;
    store_result = KP_ERR_NONE;
    gs = kb_groups_new(&env);
    ck_assert_ptr_nonnull(gs);
}

static void teardown(void)
{
    kb_groups_free(gs);
}

static kb_group *group(void)
{
    return kb_groups_find(gs, KP_STR_LIT("g"));
}

/* A JoinGroup of protocol type "consumer" offering protocol "range" (and
 * "rr" after it when two is set). */
static void join_full(tw *w, const char *member, const char *instance, int16_t version,
                      const char *meta, bool two, int64_t now)
{
    memset(w, 0, sizeof(*w));
    kp_join_group_req_join_group_request_protocol protos[2] = {
        {KP_STR_LIT("range"), {(const uint8_t *)meta, (int32_t)strlen(meta)}},
        {KP_STR_LIT("rr"), {(const uint8_t *)"x", 1}},
    };
    kp_join_group_req rq;
    kp_join_group_req_defaults(&rq);
    rq.group_id = KP_STR_LIT("g");
    rq.session_timeout_ms = SESSION;
    rq.rebalance_timeout_ms = REBALANCE;
    rq.member_id = kp_str_from(member);
    rq.group_instance_id = instance != NULL ? kp_str_from(instance) : KP_STR_NULL;
    rq.protocol_type = KP_STR_LIT("consumer");
    rq.protocols.n = two ? 2 : 1;
    rq.protocols.v = protos;
    kb_group_client cl = {KP_STR_LIT("client"), KP_STR_LIT("/127.0.0.1"), version};
    ck_assert_int_eq(kb_group_join(gs, &rq, &cl, w, now), KP_ERR_NONE);
}

static void join(tw *w, const char *member, int64_t now)
{
    join_full(w, member, NULL, 5, "m", false, now);
}

static void sync(tw *w, const char *member, int32_t gen, const char *const *assign, int n,
                 int64_t now)
{
    kp_sync_group_req_sync_group_request_assignment a[4];
    for (int i = 0; i < n; i++) {
        a[i].member_id = kp_str_from(assign[2 * i]);
        a[i].assignment = (kp_slice){(const uint8_t *)assign[2 * i + 1],
                                     (int32_t)strlen(assign[2 * i + 1])};
    }
    kp_sync_group_req rq;
    kp_sync_group_req_defaults(&rq);
    rq.group_id = KP_STR_LIT("g");
    rq.generation_id = gen;
    rq.member_id = kp_str_from(member);
    rq.assignments.n = n;
    rq.assignments.v = a;
    memset(w, 0, sizeof(*w));
    ck_assert_int_eq(kb_group_sync(gs, &rq, w, now), KP_ERR_NONE);
}

static kp_err heartbeat(const char *member, const char *instance, int32_t gen, int64_t now)
{
    kp_heartbeat_req rq = {KP_STR_LIT("g"), gen, kp_str_from(member),
                           instance ? kp_str_from(instance) : KP_STR_NULL};
    return kb_group_heartbeat(gs, &rq, now);
}

/* One member through MEMBER_ID_REQUIRED, the initial delay and its sync. */
static void stable_one(char *id_out, int64_t *now)
{
    tw w;
    join(&w, "", *now);
    ck_assert(w.answered);
    ck_assert_int_eq(w.err, KP_ERR_MEMBER_ID_REQUIRED);
    ck_assert_str_eq(w.member_id, "client-uuid-1");
    strcpy(id_out, w.member_id);
    join(&w, id_out, *now);
    ck_assert(!w.answered); /* the initial rebalance delay holds it */
    ck_assert_int_eq(group()->state, KB_GS_PREPARING_REBALANCE);
    ck_assert_int_eq(kb_group_next_deadline(group()), *now + DELAY);
    *now += DELAY;
    kb_group_tick(gs, group(), *now);
    ck_assert(w.answered);
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    ck_assert_int_eq(w.generation, 1);
    ck_assert_str_eq(w.leader, id_out);
    ck_assert_int_eq(w.nmembers, 1);
    const char *as[] = {id_out, "A"};
    sync(&w, id_out, 1, as, 1, *now);
    ck_assert(w.answered);
    ck_assert_str_eq(w.assignment, "A");
    ck_assert_int_eq(group()->state, KB_GS_STABLE);
}

START_TEST(test_group_join_sync_one_member)
{
    char id[64];
    int64_t now = 1000;
    stable_one(id, &now);
    ck_assert_int_eq(stores, 1);
    ck_assert_int_eq(heartbeat(id, NULL, 1, now), KP_ERR_NONE);
    ck_assert_int_eq(heartbeat(id, NULL, 7, now), KP_ERR_ILLEGAL_GENERATION);
    ck_assert_int_eq(heartbeat("nobody", NULL, 1, now), KP_ERR_UNKNOWN_MEMBER_ID);
}
END_TEST

START_TEST(test_group_v3_join_gets_member_id_at_once)
{
    tw w;
    join_full(&w, "", NULL, 3, "m", false, 0);
    ck_assert(!w.answered);
    kb_group_tick(gs, group(), DELAY);
    ck_assert(w.answered);
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    ck_assert_str_eq(w.member_id, "client-uuid-1");
}
END_TEST

/* Brings a second member in: both rejoin, generation 2, both synced. */
static void stable_two(char *a, char *b, int64_t *now)
{
    stable_one(a, now);
    tw wb, wa, sa, sb;
    join(&wb, "", *now);
    strcpy(b, wb.member_id);
    join(&wb, b, *now);
    ck_assert(!wb.answered);
    ck_assert_int_eq(group()->state, KB_GS_PREPARING_REBALANCE);
    ck_assert_int_eq(heartbeat(a, NULL, 1, *now), KP_ERR_REBALANCE_IN_PROGRESS);
    join(&wa, a, *now);
    ck_assert(wa.answered && wb.answered);
    ck_assert_int_eq(wa.generation, 2);
    ck_assert_int_eq(wb.generation, 2);
    ck_assert_int_eq(wa.nmembers, 2);  /* the leader gets the members */
    ck_assert_int_eq(wb.nmembers, -1); /* a follower does not */
    sync(&sb, b, 2, NULL, 0, *now);
    ck_assert(!sb.answered);
    const char *as[] = {a, "P0", b, "P1"};
    sync(&sa, a, 2, as, 2, *now);
    ck_assert(sa.answered && sb.answered);
    ck_assert_str_eq(sa.assignment, "P0");
    ck_assert_str_eq(sb.assignment, "P1");
    ck_assert_int_eq(group()->state, KB_GS_STABLE);
}

START_TEST(test_group_second_member_rebalances)
{
    char a[64], b[64];
    int64_t now = 0;
    stable_two(a, b, &now);
    ck_assert_int_eq(group()->generation, 2);
}
END_TEST

START_TEST(test_group_session_expiry_rebalances)
{
    char a[64], b[64];
    int64_t now = 0;
    stable_two(a, b, &now);
    now += SESSION - 1;
    ck_assert_int_eq(heartbeat(a, NULL, 2, now), KP_ERR_NONE);
    kb_group_tick(gs, group(), now);
    ck_assert_int_eq(group()->nmembers, 2);
    now += 1;
    kb_group_tick(gs, group(), now);
    ck_assert_int_eq(group()->nmembers, 1); /* b expired */
    ck_assert_int_eq(group()->state, KB_GS_PREPARING_REBALANCE);
    ck_assert_int_eq(heartbeat(b, NULL, 2, now), KP_ERR_UNKNOWN_MEMBER_ID);
    tw wa;
    join(&wa, a, now);
    ck_assert(wa.answered);
    ck_assert_int_eq(wa.generation, 3);
}
END_TEST

START_TEST(test_group_leave_to_empty)
{
    char a[64], b[64];
    int64_t now = 0;
    stable_two(a, b, &now);
    ck_assert_int_eq(kb_group_leave(gs, group(), KP_STR_LIT("nobody"), KP_STR_NULL, now),
                     KP_ERR_UNKNOWN_MEMBER_ID);
    ck_assert_int_eq(kb_group_leave(gs, group(), kp_str_from(a), KP_STR_NULL, now), KP_ERR_NONE);
    ck_assert_int_eq(group()->state, KB_GS_PREPARING_REBALANCE);
    ck_assert_str_eq(group()->leader_id, b);
    int before = stores;
    ck_assert_int_eq(kb_group_leave(gs, group(), kp_str_from(b), KP_STR_NULL, now), KP_ERR_NONE);
    ck_assert_int_eq(group()->state, KB_GS_EMPTY);
    ck_assert_int_eq(group()->generation, 3);
    ck_assert_int_eq(stores, before + 1); /* the empty group is written */
}
END_TEST

START_TEST(test_group_rebalance_timeout_drops_silent_member)
{
    char a[64], b[64];
    int64_t now = 0;
    stable_two(a, b, &now);
    tw wb;
    join_full(&wb, b, NULL, 5, "changed", false, now);
    ck_assert(!wb.answered);
    now += REBALANCE - 1;
    ck_assert_int_eq(heartbeat(a, NULL, 2, now), KP_ERR_REBALANCE_IN_PROGRESS);
    kb_group_tick(gs, group(), now);
    ck_assert(!wb.answered);
    now += 1;
    kb_group_tick(gs, group(), now);
    ck_assert(wb.answered);
    ck_assert_int_eq(wb.generation, 3);
    ck_assert_int_eq(group()->nmembers, 1);
    ck_assert_str_eq(wb.leader, b);
}
END_TEST

START_TEST(test_group_unsynced_follower_expires)
{
    char a[64], b[64];
    int64_t now = 0;
    stable_one(a, &now);
    tw wb, wa, sa;
    join(&wb, "", now);
    strcpy(b, wb.member_id);
    join(&wb, b, now);
    join(&wa, a, now);
    const char *as[] = {a, "P0", b, "P1"};
    sync(&sa, a, 2, as, 2, now);
    ck_assert(sa.answered);
    for (int i = 0; i < REBALANCE / 5000; i++) {
        now += 5000;
        ck_assert_int_eq(heartbeat(a, NULL, 2, now), KP_ERR_NONE);
        ck_assert_int_eq(heartbeat(b, NULL, 2, now), KP_ERR_NONE); /* alive, never syncs */
        kb_group_tick(gs, group(), now);
    }
    ck_assert_int_eq(group()->nmembers, 1); /* b never synced */
    ck_assert_int_eq(group()->state, KB_GS_PREPARING_REBALANCE);
}
END_TEST

START_TEST(test_group_static_member_rejoins_without_rebalance)
{
    int64_t now = 0;
    tw w;
    join_full(&w, "", "inst-1", 5, "m", false, now);
    ck_assert(!w.answered); /* static members get no MEMBER_ID_REQUIRED */
    now += DELAY;
    kb_group_tick(gs, group(), now);
    ck_assert(w.answered);
    char old[64];
    strcpy(old, w.member_id);
    ck_assert_str_eq(old, "inst-1-uuid-1");
    tw s;
    const char *as[] = {old, "A"};
    sync(&s, old, 1, as, 1, now);
    ck_assert_int_eq(group()->state, KB_GS_STABLE);
    /* the process restarts: same instance id, no member id */
    join_full(&w, "", "inst-1", 9, "m", false, now);
    ck_assert(w.answered);
    ck_assert_int_eq(w.err, KP_ERR_NONE);
    ck_assert_int_eq(w.generation, 1);
    ck_assert_str_eq(w.member_id, "inst-1-uuid-2");
    ck_assert(w.skip); /* the leader keeps its assignment */
    ck_assert_int_eq(group()->state, KB_GS_STABLE);
    ck_assert_int_eq(heartbeat(old, "inst-1", 1, now), KP_ERR_FENCED_INSTANCE_ID);
    ck_assert_int_eq(heartbeat("inst-1-uuid-2", "inst-1", 1, now), KP_ERR_NONE);
    sync(&s, "inst-1-uuid-2", 1, NULL, 0, now);
    ck_assert_str_eq(s.assignment, "A");
    ck_assert_int_eq(kb_group_leave(gs, group(), kp_str_from(old), KP_STR_LIT("inst-1"), now),
                     KP_ERR_FENCED_INSTANCE_ID);
}
END_TEST

START_TEST(test_group_errors)
{
    tw w;
    kp_join_group_req rq;
    ck_assert_int_eq(heartbeat("x", NULL, 1, 0), KP_ERR_UNKNOWN_MEMBER_ID);
    join_full(&w, "known-member", NULL, 5, "m", false, 0);
    ck_assert_int_eq(w.err, KP_ERR_UNKNOWN_MEMBER_ID);
    kp_join_group_req_defaults(&rq);
    char id[64];
    int64_t now = 0;
    stable_one(id, &now);
    /* a different protocol type */
    kp_join_group_req_join_group_request_protocol p = {KP_STR_LIT("range"), {NULL, 0}};
    rq.group_id = KP_STR_LIT("g");
    rq.session_timeout_ms = SESSION;
    rq.member_id = KP_STR_LIT("");
    rq.protocol_type = KP_STR_LIT("connect");
    rq.protocols.n = 1;
    rq.protocols.v = &p;
    kb_group_client cl = {KP_STR_LIT("c"), KP_STR_LIT("/h"), 5};
    memset(&w, 0, sizeof(w));
    kb_group_join(gs, &rq, &cl, &w, now);
    ck_assert_int_eq(w.err, KP_ERR_INCONSISTENT_GROUP_PROTOCOL);
    memset(&w, 0, sizeof(w));
    rq.session_timeout_ms = 10;
    kb_group_join(gs, &rq, &cl, &w, now);
    ck_assert_int_eq(w.err, KP_ERR_INVALID_SESSION_TIMEOUT);
    sync(&w, id, 5, NULL, 0, now);
    ck_assert_int_eq(w.err, KP_ERR_ILLEGAL_GENERATION);
    sync(&w, "who", 1, NULL, 0, now);
    ck_assert_int_eq(w.err, KP_ERR_UNKNOWN_MEMBER_ID);
}
END_TEST

START_TEST(test_group_max_size)
{
    int64_t now = 0;
    char id[64];
    stable_one(id, &now);
    /* While rebalancing, Kafka counts the members waiting in JoinGroup. */
    tw w[4];
    for (int i = 0; i < 4; i++)
        join_full(&w[i], "", NULL, 3, "m", false, now);
    ck_assert(!w[0].answered && !w[1].answered && !w[2].answered);
    ck_assert(w[3].answered);
    ck_assert_int_eq(w[3].err, KP_ERR_GROUP_MAX_SIZE_REACHED);
}
END_TEST

START_TEST(test_group_commit_checks)
{
    kb_group *g;
    ck_assert_int_eq(kb_groups_get(gs, KP_STR_LIT("g"), &g), KP_ERR_NONE);
    ck_assert_int_eq(kb_group_check_commit(g, KP_STR_LIT(""), KP_STR_NULL, -1), KP_ERR_NONE);
    ck_assert_int_eq(kb_group_check_commit(g, KP_STR_LIT("m"), KP_STR_NULL, 1),
                     KP_ERR_UNKNOWN_MEMBER_ID);
    char id[64];
    int64_t now = 0;
    stable_one(id, &now);
    ck_assert_int_eq(kb_group_check_commit(g, KP_STR_LIT(""), KP_STR_NULL, -1),
                     KP_ERR_UNKNOWN_MEMBER_ID);
    ck_assert_int_eq(kb_group_check_commit(g, kp_str_from(id), KP_STR_NULL, 1), KP_ERR_NONE);
    ck_assert_int_eq(kb_group_check_commit(g, kp_str_from(id), KP_STR_NULL, 0),
                     KP_ERR_ILLEGAL_GENERATION);
}
END_TEST

START_TEST(test_group_store_failure_fails_sync)
{
    tw w, j;
    join_full(&j, "", NULL, 3, "m", false, 0);
    kb_group_tick(gs, group(), DELAY);
    char id[64];
    strcpy(id, group()->members[0]->member_id);
    store_result = KP_ERR_COORDINATOR_NOT_AVAILABLE;
    const char *as[] = {id, "A"};
    sync(&w, id, 1, as, 1, DELAY);
    ck_assert(w.answered);
    ck_assert_int_eq(w.err, KP_ERR_COORDINATOR_NOT_AVAILABLE);
    ck_assert_int_ne(group()->state, KB_GS_STABLE);
}
END_TEST

START_TEST(test_group_record_round_trip)
{
    char a[64], b[64];
    int64_t now = 0;
    stable_two(a, b, &now);
    kp_arena ar;
    kp_arena_init(&ar);
    kp_group_metadata_value v, back;
    ck_assert_int_eq(kb_group_to_record(group(), &ar, &v), KP_ERR_NONE);
    kp_writer w;
    kp_writer_init(&w, 64);
    kb_offsets_write_group_value(&w, &v);
    ck_assert_int_eq(kb_offsets_read_group_value((kp_slice){w.buf, (int32_t)w.len}, &ar, &back),
                     KP_ERR_NONE);
    kb_group *h;
    ck_assert_int_eq(kb_groups_get(gs, KP_STR_LIT("h"), &h), KP_ERR_NONE);
    ck_assert_int_eq(kb_group_from_record(h, &back, 0), KP_ERR_NONE);
    ck_assert_int_eq(h->state, KB_GS_STABLE);
    ck_assert_int_eq(h->generation, 2);
    ck_assert_int_eq(h->nmembers, 2);
    ck_assert_str_eq(h->leader_id, a);
    ck_assert_str_eq(h->protocol_name, "range");
    ck_assert_int_eq(h->members[1]->assignment_len, 2);
    ck_assert_int_eq(memcmp(h->members[1]->assignment, "P1", 2), 0);
    kp_writer_fini(&w);
    kp_arena_fini(&ar);
}
END_TEST

/* ---- kb_offsets --------------------------------------------------------- */

static void assert_bytes(const kp_writer *w, const char *hex)
{
    char got[1024] = "";
    for (size_t i = 0; i < w->len && i * 2 + 2 < sizeof(got); i++)
        snprintf(got + i * 2, 3, "%02x", w->buf[i]);
    ck_assert_str_eq(got, hex);
}

START_TEST(test_offsets_record_bytes)
{
    kp_writer w;
    kp_writer_init(&w, 64);
    kb_offsets_write_commit_key(&w, KP_STR_LIT("g"), KP_STR_LIT("t"), 3);
    assert_bytes(&w, "0001" "000167" "000174" "00000003");
    kp_writer_fini(&w);
    kp_writer_init(&w, 64);
    kb_offset o = {.offset = 42, .leader_epoch = 5, .metadata = "md", .metadata_len = 2,
                   .commit_ts = 0x0102, .expire_ts = -1};
    kb_offsets_write_commit_value(&w, &o);
    assert_bytes(&w, "0003" "000000000000002a" "00000005" "00026d64" "0000000000000102");
    kp_writer_fini(&w);
    kp_writer_init(&w, 64);
    o.expire_ts = 0x0203;
    kb_offsets_write_commit_value(&w, &o);
    assert_bytes(&w, "0001" "000000000000002a" "00026d64" "0000000000000102" "0000000000000203");
    kp_writer_fini(&w);
    kp_writer_init(&w, 64);
    kb_offsets_write_group_key(&w, KP_STR_LIT("g"));
    assert_bytes(&w, "0002" "000167");
    kp_writer_fini(&w);
    /* KIP-848: ConsumerGroupMetadataKey v3, ConsumerGroupMetadataValue v0
     * (flexible: an empty tagged-field section), and back. */
    kp_writer_init(&w, 64);
    kb_offsets_write_cgroup_key(&w, KP_STR_LIT("g"));
    assert_bytes(&w, "0003" "000167");
    kp_arena a;
    kp_arena_init(&a);
    kb_offsets_key k;
    ck_assert_int_eq(kb_offsets_read_key((kp_slice){w.buf, (int32_t)w.len}, &a, &k), KP_ERR_NONE);
    ck_assert_int_eq(k.type, KB_OFFSETS_KEY_CGROUP);
    ck_assert(kp_str_eq_c(k.group, "g"));
    kp_writer_fini(&w);
    kp_writer_init(&w, 64);
    kb_offsets_write_cgroup_value(&w, 7);
    assert_bytes(&w, "0000" "00000007" "00");
    int32_t epoch = 0;
    ck_assert_int_eq(kb_offsets_read_cgroup_value((kp_slice){w.buf, (int32_t)w.len}, &a, &epoch),
                     KP_ERR_NONE);
    ck_assert_int_eq(epoch, 7);
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}
END_TEST

/* Committed metadata is bytes on the wire (a string that may hold NULs):
 * it keeps its length through the record, the map and a copy. */
START_TEST(test_offsets_metadata_with_nul)
{
    static const char md[] = "Hello\0world!";
    kb_offset o = {.topic = "t", .partition = 0, .offset = 42, .leader_epoch = -1,
                   .metadata = (char *)md, .metadata_len = 12, .expire_ts = -1};
    kp_writer w;
    kp_writer_init(&w, 64);
    kb_offsets_write_commit_value(&w, &o);
    kp_arena a;
    kp_arena_init(&a);
    kb_offset back;
    ck_assert_int_eq(
        kb_offsets_read_commit_value((kp_slice){w.buf, (int32_t)w.len}, &a, &back), KP_ERR_NONE);
    ck_assert_int_eq(back.metadata_len, 12);
    ck_assert_mem_eq(back.metadata, md, 12);
    back.topic = "t";
    kb_offset_map m;
    kb_offset_map_init(&m);
    ck_assert_int_eq(kb_offset_map_put(&m, &back), KP_ERR_NONE);
    kp_str got = kb_offset_metadata(kb_offset_map_get(&m, KP_STR_LIT("t"), 0));
    ck_assert_int_eq(got.len, 12);
    ck_assert_mem_eq(got.p, md, 12);
    char *copy = kb_offset_metadata_dup(&back);
    ck_assert_mem_eq(copy, md, 13);
    free(copy);
    kb_offset_map_fini(&m);
    kp_arena_fini(&a);
    kp_writer_fini(&w);
}
END_TEST

START_TEST(test_offsets_group_value_bytes)
{
    kp_group_metadata_value_member_metadata m = {
        KP_STR_LIT("m"), KP_STR_NULL, KP_STR_LIT("c"), KP_STR_LIT("/h"), 300, 100,
        {(const uint8_t *)"S", 1}, {(const uint8_t *)"A", 1}};
    kp_group_metadata_value v = {KP_STR_LIT("consumer"), 7, KP_STR_LIT("range"), KP_STR_LIT("m"),
                                 9, {1, &m}};
    kp_writer w;
    kp_writer_init(&w, 64);
    kb_offsets_write_group_value(&w, &v);
    assert_bytes(&w, "0003" "0008636f6e73756d6572" "00000007" "000572616e6765" "00016d"
                     "0000000000000009" "00000001" "00016d" "ffff" "000163" "00022f68"
                     "0000012c" "00000064" "0000000153" "0000000141");
    kp_arena a;
    kp_arena_init(&a);
    kb_offsets_key k;
    kp_writer kw;
    kp_writer_init(&kw, 16);
    kb_offsets_write_commit_key(&kw, KP_STR_LIT("grp"), KP_STR_LIT("top"), 9);
    ck_assert_int_eq(kb_offsets_read_key((kp_slice){kw.buf, (int32_t)kw.len}, &a, &k), KP_ERR_NONE);
    ck_assert_int_eq(k.type, KB_OFFSETS_KEY_COMMIT);
    ck_assert(kp_str_eq_c(k.topic, "top") && k.partition == 9);
    const uint8_t newer[] = {0, 4, 0, 1, 'g'};
    ck_assert_int_eq(kb_offsets_read_key((kp_slice){newer, 5}, &a, &k), KP_ERR__NOENT);
    ck_assert_int_eq(kb_offsets_read_key((kp_slice){newer, 1}, &a, &k), KP_ERR__CORRUPT);
    kp_writer_fini(&kw);
    kp_writer_fini(&w);
    kp_arena_fini(&a);
}
END_TEST

START_TEST(test_offsets_partition_for_matches_java)
{
    /* expected values from Java's String.hashCode */
    ck_assert_int_eq(kb_offsets_partition_for(KP_STR_LIT("g1"), 50), 42);
    ck_assert_int_eq(kb_offsets_partition_for(KP_STR_LIT("my-group"), 50), 12);
    ck_assert_int_eq(kb_offsets_partition_for(KP_STR_LIT("console-consumer-12345"), 50), 6);
    ck_assert_int_eq(kb_offsets_partition_for(KP_STR_LIT("gr\xc3\xbcn\xf0\x9f\x98\x80"), 50), 8);
}
END_TEST

START_TEST(test_offsets_map_against_reference)
{
    kb_offset_map m;
    kb_offset_map_init(&m);
    static int64_t ref[8][200];
    memset(ref, -1, sizeof(ref));
    unsigned seed = 7;
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        int t = (int)((seed >> 8) % 8), p = (int)((seed >> 12) % 200);
        char name[8];
        snprintf(name, sizeof(name), "t%d", t);
        if ((seed >> 20) % 3 == 0) {
            ck_assert_int_eq(kb_offset_map_del(&m, kp_str_from(name), p), ref[t][p] >= 0);
            ref[t][p] = -1;
        } else {
            kb_offset o = {.topic = name, .partition = p, .offset = step, .metadata = ""};
            ck_assert_int_eq(kb_offset_map_put(&m, &o), KP_ERR_NONE);
            ref[t][p] = step;
        }
    }
    size_t n = 0;
    for (int t = 0; t < 8; t++) {
        for (int p = 0; p < 200; p++) {
            char name[8];
            snprintf(name, sizeof(name), "t%d", t);
            const kb_offset *o = kb_offset_map_get(&m, kp_str_from(name), p);
            ck_assert_int_eq(o != NULL, ref[t][p] >= 0);
            if (o != NULL)
                ck_assert_int_eq(o->offset, ref[t][p]);
            n += ref[t][p] >= 0;
        }
    }
    ck_assert_uint_eq(kb_offset_map_count(&m), n);
    kb_offset_map_fini(&m);
}
END_TEST

Suite *group_suite(void)
{
    Suite *s = suite_create("group");
    TCase *tc = tcase_create("state_machine");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_group_join_sync_one_member);
    tcase_add_test(tc, test_group_v3_join_gets_member_id_at_once);
    tcase_add_test(tc, test_group_second_member_rebalances);
    tcase_add_test(tc, test_group_session_expiry_rebalances);
    tcase_add_test(tc, test_group_leave_to_empty);
    tcase_add_test(tc, test_group_rebalance_timeout_drops_silent_member);
    tcase_add_test(tc, test_group_unsynced_follower_expires);
    tcase_add_test(tc, test_group_static_member_rejoins_without_rebalance);
    tcase_add_test(tc, test_group_errors);
    tcase_add_test(tc, test_group_max_size);
    tcase_add_test(tc, test_group_commit_checks);
    tcase_add_test(tc, test_group_store_failure_fails_sync);
    tcase_add_test(tc, test_group_record_round_trip);
    suite_add_tcase(s, tc);
    TCase *to = tcase_create("offsets");
    tcase_add_test(to, test_offsets_record_bytes);
    tcase_add_test(to, test_offsets_group_value_bytes);
    tcase_add_test(to, test_offsets_metadata_with_nul);
    tcase_add_test(to, test_offsets_partition_for_matches_java);
    tcase_add_test(to, test_offsets_map_against_reference);
    suite_add_tcase(s, to);
    return s;
}
