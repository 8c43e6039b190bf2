/* Unit tests of kb_streams_group (KIP-1071 streams groups) on a fake clock:
 * internal topics created with the counts the topology resolves, active
 * tasks handed over only after their revocation, standby copies on other
 * processes, the initial rebalance delay and session expiry. The topics the
 * group sees come from a table in this file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_streams_group.h"

typedef struct ttopic {
    char name[32];
    int32_t np;
} ttopic;

static ttopic topics[8];
static int ntopics;
static kb_streams_group *sg;
static kb_consumer_group_env tenv;
static kb_streams_group_env env;

static bool t_by_name(void *ctx, const char *name, kb_cg_topic *out)
{
    (void)ctx;
    for (int i = 0; i < ntopics; i++) {
        if (strcmp(topics[i].name, name) == 0) {
            kp_uuid id = {{(uint8_t)(i + 1)}};
            *out = (kb_cg_topic){topics[i].name, id, topics[i].np};
            return true;
        }
    }
    return false;
}

static kp_err t_create(void *ctx, const char *name, int32_t partitions, char *const *configs,
                       int32_t nconfigs)
{
    (void)ctx;
    (void)configs;
    (void)nconfigs;
    ck_assert_int_lt(ntopics, 8);
    snprintf(topics[ntopics].name, sizeof(topics[ntopics].name), "%s", name);
    topics[ntopics++].np = partitions;
    return KP_ERR_NONE;
}

static void setup(void)
{
    ntopics = 0;
    t_create(NULL, "in", 4, NULL, 0);
    tenv = (kb_consumer_group_env){.topic_by_name = t_by_name};
    env = (kb_streams_group_env){.topics = &tenv, .create_topic = t_create,
                                 .heartbeat_interval_ms = 5000, .session_timeout_ms = 45000,
                                 .max_size = 100};
    sg = kb_streams_group_new();
}

static void teardown(void)
{
    kb_streams_group_free(sg);
}

/* Subtopology "0" reads "in" and writes "rep" (no count); "1" reads "rep"
 * and keeps the changelog "cl". */
static kp_str s_in = KP_STR_LIT("in"), s_rep = KP_STR_LIT("rep");
static kp_streams_group_heartbeat_req_topic_info t_rep = {.name = KP_STR_LIT("rep")};
static kp_streams_group_heartbeat_req_topic_info t_cl = {.name = KP_STR_LIT("cl")};
static kp_streams_group_heartbeat_req_subtopology subs[2];
static kp_streams_group_heartbeat_req_topology topo;
static kp_streams_group_heartbeat_req_task_ids owned[2];

static kp_streams_group_heartbeat_req req(const char *member, int32_t epoch, const char *process)
{
    subs[0] = (kp_streams_group_heartbeat_req_subtopology){
        .subtopology_id = KP_STR_LIT("0"), .source_topics = {1, &s_in},
        .repartition_sink_topics = {1, &s_rep}};
    subs[1] = (kp_streams_group_heartbeat_req_subtopology){
        .subtopology_id = KP_STR_LIT("1"), .repartition_source_topics = {1, &t_rep},
        .state_changelog_topics = {1, &t_cl}};
    topo = (kp_streams_group_heartbeat_req_topology){.epoch = 1, .subtopologies = {2, subs}};
    kp_streams_group_heartbeat_req r = {.group_id = KP_STR_LIT("app"),
                                        .member_id = kp_str_from(member),
                                        .member_epoch = epoch,
                                        .instance_id = KP_STR_NULL,
                                        .rack_id = KP_STR_NULL,
                                        .rebalance_timeout_ms = epoch == 0 ? 30000 : -1,
                                        .topology = epoch == 0 ? &topo : NULL,
                                        .active_tasks = {epoch == 0 ? 0 : -1, NULL},
                                        .standby_tasks = {epoch == 0 ? 0 : -1, NULL},
                                        .warmup_tasks = {epoch == 0 ? 0 : -1, NULL},
                                        .process_id = kp_str_from(process)};
    return r;
}

static kb_streams_group_result beat(kp_streams_group_heartbeat_req r, int64_t now)
{
    kb_streams_group_client cl = {KP_STR_LIT("c"), KP_STR_LIT("/h")};
    kb_streams_group_result res;
    ck_assert_int_eq(kb_streams_group_heartbeat(sg, &env, &r, &cl, now, &res), KP_ERR_NONE);
    ck_assert_int_eq(res.err, KP_ERR_NONE);
    return res;
}

/* The request reporting m's current active tasks as owned. */
static kp_streams_group_heartbeat_req owning(const char *member, const kb_st_member *m,
                                             const char *process, int32_t *parts)
{
    kp_streams_group_heartbeat_req r = req(member, m->epoch, process);
    int32_t n[2] = {0, 0};
    for (int32_t i = 0; i < m->active.n; i++) {
        int32_t s = kb_st_task_sub(&m->active.v[i]);
        parts[s * 8 + n[s]++] = m->active.v[i].partition;
    }
    for (int s = 0; s < 2; s++)
        owned[s] = (kp_streams_group_heartbeat_req_task_ids){
            s == 0 ? KP_STR_LIT("0") : KP_STR_LIT("1"), {n[s], parts + s * 8}};
    static kp_streams_group_heartbeat_req_task_ids none[1];
    r.active_tasks.n = 2;
    r.active_tasks.v = owned;
    r.standby_tasks.n = r.warmup_tasks.n = 0;
    r.standby_tasks.v = r.warmup_tasks.v = none;
    return r;
}

/* No active task is held (active or revoking) by two members. */
static void assert_exclusive(void)
{
    for (int32_t i = 0; i < sg->nmembers; i++)
        for (int32_t j = 0; j < sg->nmembers; j++)
            if (i != j) {
                ck_assert(!kb_cg_set_meets(&sg->members[i]->active, &sg->members[j]->active));
                ck_assert(!kb_cg_set_meets(&sg->members[i]->active, &sg->members[j]->revoking));
            }
}

START_TEST(test_streams_group_internal_topics_and_handover)
{
    int32_t parts[16];
    kb_streams_group_result a = beat(req("a", 0, "p1"), 0);
    ck_assert_int_eq(sg->topology->nstatus, 0);
    ck_assert_int_eq(ntopics, 3); /* rep and cl made with in's 4 partitions */
    ck_assert_int_eq(topics[1].np, 4);
    ck_assert_int_eq(topics[2].np, 4);
    ck_assert_int_eq(a.member->active.n, 8);
    kb_st_member *ma = kb_streams_group_member_find(sg, KP_STR_LIT("a"));

    kb_streams_group_result b = beat(req("b", 0, "p2"), 10);
    ck_assert_int_eq(b.member->active.n, 0); /* a still holds everything */
    assert_exclusive();
    a = beat(owning("a", ma, "p1", parts), 20); /* a learns what to give up */
    ck_assert_int_eq(ma->active.n, 4);
    ck_assert_int_eq(ma->revoking.n, 4);
    assert_exclusive();
    b = beat(req("b", b.epoch, "p2"), 30);
    ck_assert_int_eq(b.member->active.n, 0); /* not revoked yet */
    a = beat(owning("a", ma, "p1", parts), 40); /* a reports them gone */
    ck_assert_int_eq(ma->revoking.n, 0);
    b = beat(req("b", b.epoch, "p2"), 50);
    ck_assert_int_eq(b.member->active.n, 4);
    ck_assert_int_eq(b.epoch, sg->assignment_epoch);
    assert_exclusive();
    ck_assert_int_eq(kb_streams_group_state_of(sg), KB_STGS_STABLE);

    /* b's session ends: a gets all eight back */
    a = beat(owning("a", ma, "p1", parts), 60);
    kb_streams_group_tick(sg, &env, 50 + env.session_timeout_ms);
    ck_assert_int_eq(sg->nmembers, 1);
    a = beat(owning("a", ma, "p1", parts), 50 + env.session_timeout_ms + 1);
    ck_assert_int_eq(ma->active.n, 8);
}
END_TEST

START_TEST(test_streams_group_standby_on_other_process)
{
    env.num_standby = 1;
    kb_streams_group_result a = beat(req("a", 0, "p1"), 0);
    (void)a;
    beat(req("b", 0, "p1"), 1);
    beat(req("c", 0, "p2"), 2);
    int32_t nstandby = 0;
    for (int32_t i = 0; i < sg->nmembers; i++) {
        const kb_st_member *m = sg->members[i];
        nstandby += m->target_standby.n;
        for (int32_t k = 0; k < m->target_standby.n; k++)
            for (int32_t j = 0; j < sg->nmembers; j++) {
                const kb_st_member *o = sg->members[j];
                if (kb_cg_set_has(&o->target_active, &m->target_standby.v[k].topic,
                                  m->target_standby.v[k].partition))
                    ck_assert_str_ne(o->process_id, m->process_id);
            }
    }
    ck_assert_int_eq(nstandby, 8); /* one copy of each of the 8 tasks */
}
END_TEST

START_TEST(test_streams_group_initial_delay_and_missing_source)
{
    env.initial_delay_ms = 3000;
    kb_streams_group_result a = beat(req("a", 0, "p1"), 0);
    ck_assert(a.delayed);
    ck_assert_int_eq(a.member->active.n, 0);
    ck_assert_int_eq(a.epoch, 1);
    kb_streams_group_tick(sg, &env, 3000);
    ck_assert_int_eq(sg->group_epoch, 2);
    a = beat(req("a", a.epoch, "p1"), 3001);
    ck_assert(!a.delayed);
    ck_assert_int_eq(a.member->active.n, 8);
    ck_assert_int_eq(a.epoch, 2);

    /* a source topic gone: MISSING_SOURCE_TOPICS and no tasks */
    ntopics = 0;
    t_create(NULL, "other", 1, NULL, 0);
    a = beat(req("a", a.epoch, "p1"), 3001 + 2 * KB_CONSUMER_GROUP_REFRESH_MS);
    ck_assert_int_eq(sg->topology->nstatus, 1);
    ck_assert_int_eq(sg->topology->status[0].code, KB_ST_MISSING_SOURCE_TOPICS);
    ck_assert_ptr_nonnull(strstr(sg->topology->status[0].detail, "in"));
    ck_assert_int_eq(kb_streams_group_state_of(sg), KB_STGS_NOT_READY);
}
END_TEST

Suite *streams_group_suite(void)
{
    Suite *s = suite_create("streams_group");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_streams_group_internal_topics_and_handover);
    tcase_add_test(tc, test_streams_group_standby_on_other_process);
    tcase_add_test(tc, test_streams_group_initial_delay_and_missing_source);
    suite_add_tcase(s, tc);
    return s;
}
