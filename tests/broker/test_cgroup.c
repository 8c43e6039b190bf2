/* Unit tests of kb_consumer_group (KIP-848 consumer groups) on a fake clock: the
 * assignors, epochs and incremental reconciliation, timeouts, static
 * members, regex subscriptions and the offset checks. The topics the group
 * sees come from a table in this file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_consumer_assign.h"
#include "kb_consumer_group.h"
#include "kb_consumer_group_rec.h"

#define SESSION  45000
#define INTERVAL 5000

typedef struct ttopic {
    char name[32];
    int32_t np;
    kp_uuid id;
} ttopic;

static ttopic topics[8];
static int ntopics;
static int id_seq;
static kb_consumer_group *cg;
static kb_consumer_group_env env;
static const char *const assignors[] = {"uniform", "range"};

static void add_topic(const char *name, int32_t np)
{
    ttopic *t = &topics[ntopics++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->np = np;
    memset(&t->id, 0, sizeof(t->id));
    t->id.b[0] = (uint8_t)(0x10 + ntopics);
    t->id.b[15] = (uint8_t)ntopics;
}

static bool t_by_name(void *ctx, const char *name, kb_cg_topic *out)
{
    (void)ctx;
    for (int i = 0; i < ntopics; i++) {
        if (strcmp(topics[i].name, name) == 0) {
            *out = (kb_cg_topic){topics[i].name, topics[i].id, topics[i].np};
            return true;
        }
    }
    return false;
}

static bool t_at(void *ctx, size_t i, kb_cg_topic *out)
{
    (void)ctx;
    if (i >= (size_t)ntopics)
        return false;
    *out = (kb_cg_topic){topics[i].name, topics[i].id, topics[i].np};
    return true;
}

static void t_member_id(char out[37], void *ctx)
{
    (void)ctx;
    snprintf(out, 37, "gen-%d", ++id_seq);
}

static void setup(void)
{
    ntopics = 0;
    id_seq = 0;
    add_topic("orders", 6);
    add_topic("audit", 3);
    add_topic("__consumer_offsets", 2);
    env = (kb_consumer_group_env){.topic_by_name = t_by_name,
                          .topic_at = t_at,
                          .member_id = t_member_id,
                          .heartbeat_interval_ms = INTERVAL,
                          .session_timeout_ms = SESSION,
                          .max_size = 100,
                          .assignors = assignors,
                          .nassignors = 2};
    cg = kb_consumer_group_new();
    ck_assert_ptr_nonnull(cg);
}

static void teardown(void)
{
    kb_consumer_group_free(cg);
}

/* ---- request helpers ---------------------------------------------------- */

typedef struct hb {
    kp_consumer_group_heartbeat_req rq;
    kp_str names[4];
    kp_consumer_group_heartbeat_req_topic_partitions tps[4];
    int32_t parts[4][16];
} hb;

static hb *hb_new(const char *member, int32_t epoch)
{
    hb *h = calloc(1, sizeof(*h));
    ck_assert_ptr_nonnull(h);
    kp_consumer_group_heartbeat_req_defaults(&h->rq);
    h->rq.group_id = KP_STR_LIT("g");
    h->rq.member_id = kp_str_from(member);
    h->rq.member_epoch = epoch;
    return h;
}

/* A join (epoch 0) subscribing to one topic name (or a regex). */
static hb *hb_join(const char *member, const char *topic, const char *regex)
{
    hb *h = hb_new(member, 0);
    h->rq.rebalance_timeout_ms = 30000;
    if (topic != NULL) {
        h->names[0] = kp_str_from(topic);
        h->rq.subscribed_topic_names.n = 1;
        h->rq.subscribed_topic_names.v = h->names;
    }
    if (regex != NULL)
        h->rq.subscribed_topic_regex = kp_str_from(regex);
    h->rq.topic_partitions.n = 0;
    h->rq.topic_partitions.v = h->tps;
    return h;
}

/* Sets the partitions of topic index ti the member says it owns. */
static void hb_owned(hb *h, int ti, const int32_t *parts, int32_t n)
{
    int k = h->rq.topic_partitions.n < 0 ? 0 : h->rq.topic_partitions.n;
    h->tps[k].topic_id = topics[ti].id;
    memcpy(h->parts[k], parts, (size_t)n * sizeof(*parts));
    h->tps[k].partitions.n = n;
    h->tps[k].partitions.v = h->parts[k];
    h->rq.topic_partitions.n = k + 1;
    h->rq.topic_partitions.v = h->tps;
}

static kb_consumer_group_result send(hb *h, int64_t now)
{
    kb_consumer_group_client cl = {KP_STR_LIT("client"), KP_STR_LIT("/127.0.0.1"), 1};
    kb_consumer_group_result res;
    ck_assert_int_eq(kb_consumer_group_heartbeat(cg, &env, &h->rq, &cl, now, &res), KP_ERR_NONE);
    free(h);
    return res;
}

static int32_t owned_count(const char *member)
{
    const kb_cg_member *m = kb_consumer_group_member_find(cg, kp_str_from(member));
    ck_assert_ptr_nonnull(m);
    return m->assigned.n;
}

/* Invariant 1: no partition is assigned or being revoked by two members. */
static void check_exclusive(void)
{
    for (int i = 0; i < cg->nmembers; i++) {
        const kb_cg_member *a = cg->members[i];
        for (int j = i + 1; j < cg->nmembers; j++) {
            const kb_cg_member *b = cg->members[j];
            for (int k = 0; k < a->assigned.n + a->revoking.n; k++) {
                const kb_cg_tp *tp = k < a->assigned.n ? &a->assigned.v[k]
                                                       : &a->revoking.v[k - a->assigned.n];
                ck_assert(!kb_cg_set_has(&b->assigned, &tp->topic, tp->partition));
                ck_assert(!kb_cg_set_has(&b->revoking, &tp->topic, tp->partition));
            }
        }
    }
}

/* The member's assigned partitions of topic ti as owned partitions. */
static void own_all(hb *h, const char *member, int ti)
{
    const kb_cg_member *m = kb_consumer_group_member_find(cg, kp_str_from(member));
    int32_t parts[16], n = 0;
    for (int i = 0; i < m->assigned.n; i++)
        if (memcmp(&m->assigned.v[i].topic, &topics[ti].id, sizeof(kp_uuid)) == 0)
            parts[n++] = m->assigned.v[i].partition;
    hb_owned(h, ti, parts, n);
}

/* ---- assignors ---------------------------------------------------------- */

static kb_cg_member *fake_member(const char *id, const char *topic)
{
    kb_cg_member *m = calloc(1, sizeof(*m));
    ck_assert_ptr_nonnull(m);
    m->member_id = strdup(id);
    m->ntopics = topic != NULL ? 1 : 0;
    m->topics = calloc(2, sizeof(char *));
    if (topic != NULL)
        m->topics[0] = strdup(topic);
    return m;
}

static void fake_free(kb_cg_member *m)
{
    free(m->member_id);
    for (int i = 0; i < m->ntopics; i++)
        free(m->topics[i]);
    free(m->topics);
    free(m->target.v);
    free(m);
}

START_TEST(test_cgroup_uniform_balances_and_sticks)
{
    kb_cg_topic t[] = {{"orders", topics[0].id, 7}};
    kb_cg_member *ms[3] = {fake_member("c", "orders"), fake_member("a", "orders"),
                           fake_member("b", "orders")};
    ck_assert_int_eq(kb_consumer_assign_uniform(ms, 2, t, 1), KP_ERR_NONE);
    ck_assert_int_eq(ms[0]->target.n + ms[1]->target.n, 7);
    ck_assert_int_le(abs(ms[0]->target.n - ms[1]->target.n), 1);
    kb_cg_set before0 = {malloc(sizeof(kb_cg_tp) * 8), ms[0]->target.n};
    memcpy(before0.v, ms[0]->target.v, sizeof(kb_cg_tp) * (size_t)before0.n);
    /* A third member: each keeps what it can of its share (7 = 3+2+2). */
    ck_assert_int_eq(kb_consumer_assign_uniform(ms, 3, t, 1), KP_ERR_NONE);
    int total = 0, kept = 0;
    for (int i = 0; i < 3; i++) {
        total += ms[i]->target.n;
        ck_assert(ms[i]->target.n == 2 || ms[i]->target.n == 3);
    }
    for (int i = 0; i < ms[0]->target.n; i++)
        kept += kb_cg_set_has(&before0, &ms[0]->target.v[i].topic, ms[0]->target.v[i].partition);
    ck_assert_int_eq(total, 7);
    ck_assert_int_eq(kept, ms[0]->target.n); /* nothing moved needlessly */
    for (int p = 0; p < 7; p++) {
        int owners = 0;
        for (int i = 0; i < 3; i++)
            owners += kb_cg_set_has(&ms[i]->target, &topics[0].id, p);
        ck_assert_int_eq(owners, 1);
    }
    free(before0.v);
    for (int i = 0; i < 3; i++)
        fake_free(ms[i]);
}
END_TEST

/* Every partition count against every group size, then again with one
 * member fewer: each partition has one owner, counts differ by at most
 * one, and the members that stay keep all they had. */
START_TEST(test_cgroup_uniform_property)
{
    for (int32_t np = 0; np <= 13; np++) {
        for (int32_t n = 2; n <= 7; n++) {
            kb_cg_topic t[] = {{"orders", topics[0].id, np}};
            kb_cg_member *ms[7];
            char id[8];
            for (int32_t i = 0; i < n; i++) {
                snprintf(id, sizeof(id), "m%d", i);
                ms[i] = fake_member(id, "orders");
            }
            for (int32_t round = 0; round < 2; round++) {
                int32_t k = n - round, lo = np, hi = 0, sum = 0;
                kb_cg_set before[7];
                for (int32_t i = 0; i < k; i++) {
                    before[i].n = ms[i]->target.n;
                    before[i].v = malloc(sizeof(kb_cg_tp) * (size_t)(before[i].n + 1));
                    if (before[i].n > 0)
                        memcpy(before[i].v, ms[i]->target.v,
                               sizeof(kb_cg_tp) * (size_t)before[i].n);
                }
                ck_assert_int_eq(kb_consumer_assign_uniform(ms, k, t, 1), KP_ERR_NONE);
                for (int32_t i = 0; i < k; i++) {
                    int32_t c = ms[i]->target.n;
                    lo = c < lo ? c : lo;
                    hi = c > hi ? c : hi;
                    sum += c;
                    for (int32_t j = 0; round == 1 && j < before[i].n; j++)
                        ck_assert(kb_cg_set_has(&ms[i]->target, &before[i].v[j].topic,
                                                before[i].v[j].partition));
                    free(before[i].v);
                }
                ck_assert_int_eq(sum, np);
                ck_assert_int_le(hi - lo, 1);
                for (int32_t p = 0; p < np; p++) {
                    int owners = 0;
                    for (int32_t i = 0; i < k; i++)
                        owners += kb_cg_set_has(&ms[i]->target, &topics[0].id, p);
                    ck_assert_int_eq(owners, 1);
                }
            }
            for (int32_t i = 0; i < n; i++)
                fake_free(ms[i]);
        }
    }
}
END_TEST

START_TEST(test_cgroup_uniform_heterogeneous)
{
    /* a: orders only; b: orders and audit (6 + 3): a takes orders, b audit
     * plus what keeps the counts within one. */
    kb_cg_topic t[] = {{"audit", topics[1].id, 3}, {"orders", topics[0].id, 6}};
    kb_cg_member *ms[2] = {fake_member("a", "orders"), fake_member("b", "audit")};
    ms[1]->topics = realloc(ms[1]->topics, 3 * sizeof(char *));
    ms[1]->topics[1] = strdup("orders");
    ms[1]->ntopics = 2;
    ck_assert_int_eq(kb_consumer_assign_uniform(ms, 2, t, 2), KP_ERR_NONE);
    ck_assert_int_eq(ms[0]->target.n + ms[1]->target.n, 9);
    ck_assert_int_le(abs(ms[0]->target.n - ms[1]->target.n), 1);
    for (int i = 0; i < ms[0]->target.n; i++)
        ck_assert(memcmp(&ms[0]->target.v[i].topic, &topics[0].id, sizeof(kp_uuid)) == 0);
    for (int i = 0; i < 2; i++)
        fake_free(ms[i]);
}
END_TEST

START_TEST(test_cgroup_range_contiguous_by_member_id)
{
    kb_cg_topic t[] = {{"orders", topics[0].id, 5}};
    kb_cg_member *ms[2] = {fake_member("zed", "orders"), fake_member("amy", "orders")};
    ck_assert_int_eq(kb_consumer_assign_range(ms, 2, t, 1), KP_ERR_NONE);
    ck_assert_int_eq(ms[1]->target.n, 3);
    ck_assert_int_eq(ms[0]->target.n, 2);
    for (int p = 0; p < 3; p++)
        ck_assert(kb_cg_set_has(&ms[1]->target, &topics[0].id, p));
    for (int p = 3; p < 5; p++)
        ck_assert(kb_cg_set_has(&ms[0]->target, &topics[0].id, p));
    for (int i = 0; i < 2; i++)
        fake_free(ms[i]);
}
END_TEST

/* ---- epochs and reconciliation ------------------------------------------ */

START_TEST(test_cgroup_revoke_before_assign)
{
    kb_consumer_group_result r = send(hb_join("a", "orders", NULL), 0);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_int_eq(r.epoch, 1);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 6);
    ck_assert_int_eq(r.heartbeat_interval_ms, INTERVAL);
    ck_assert_int_eq(kb_consumer_group_state_of(cg), KB_CGS_STABLE);

    r = send(hb_join("b", "orders", NULL), 10);
    ck_assert_int_eq(r.epoch, 2); /* b's target is a's still: nothing yet */
    ck_assert_int_eq(r.assignment->n, 0);
    ck_assert_int_eq(cg->group_epoch, 2);
    ck_assert_int_eq(cg->assignment_epoch, 2);
    ck_assert_int_eq(kb_consumer_group_state_of(cg), KB_CGS_RECONCILING);
    check_exclusive();

    r = send(hb_new("a", 1), 20); /* a must revoke 3 and keeps epoch 1 */
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_int_eq(r.epoch, 1);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 3);
    const kb_cg_member *a = kb_consumer_group_member_find(cg, KP_STR_LIT("a"));
    ck_assert_int_eq(a->state, KB_CMS_UNREVOKED);
    ck_assert_int_eq(a->revoking.n, 3);
    check_exclusive();

    r = send(hb_new("b", 2), 30); /* still held by a */
    ck_assert(!r.with_assignment);
    ck_assert_int_eq(owned_count("b"), 0);

    hb *h = hb_new("a", 1);
    own_all(h, "a", 0); /* a reports it gave them up */
    r = send(h, 40);
    ck_assert_int_eq(r.epoch, 2);
    ck_assert_int_eq(a->revoking.n, 0);
    check_exclusive();

    r = send(hb_new("b", 2), 50);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 3);
    ck_assert_int_eq(kb_consumer_group_state_of(cg), KB_CGS_STABLE);
    check_exclusive();
}
END_TEST

START_TEST(test_cgroup_epoch_errors)
{
    send(hb_join("a", "orders", NULL), 0);
    kb_consumer_group_result r = send(hb_new("a", 5), 1);
    ck_assert_int_eq(r.err, KP_ERR_FENCED_MEMBER_EPOCH);
    r = send(hb_new("nobody", 1), 1);
    ck_assert_int_eq(r.err, KP_ERR_UNKNOWN_MEMBER_ID);
    send(hb_join("b", "orders", NULL), 2); /* epoch 2; a still at 1 */
    hb *h = hb_new("a", 1);
    own_all(h, "a", 0); /* still owns all six: must revoke three first */
    r = send(h, 3);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_int_eq(r.epoch, 1);
    h = hb_new("a", 1);
    own_all(h, "a", 0); /* the three it keeps */
    r = send(h, 3);
    ck_assert_int_eq(r.epoch, 2);
    /* The previous epoch with a subset of the partitions is accepted (the
     * response may have been lost); without them it is fenced. */
    h = hb_new("a", 1);
    own_all(h, "a", 0);
    ck_assert_int_eq(send(h, 4).err, KP_ERR_NONE);
    ck_assert_int_eq(send(hb_new("a", 1), 5).err, KP_ERR_FENCED_MEMBER_EPOCH);
    /* Leaving: epoch -1; again: unknown. */
    r = send(hb_new("a", KB_CONSUMER_GROUP_LEAVE_EPOCH), 6);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_int_eq(r.epoch, -1);
    ck_assert_int_eq(cg->nmembers, 1);
    ck_assert_int_eq(cg->group_epoch, 3);
    ck_assert_int_eq(send(hb_new("a", -1), 7).err, KP_ERR_UNKNOWN_MEMBER_ID);
}
END_TEST

START_TEST(test_cgroup_request_validation)
{
    hb *h = hb_join("", "orders", NULL);
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REQUEST); /* v1: member id required */
    h = hb_join("a", "orders", NULL);
    h->rq.rebalance_timeout_ms = -1;
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REQUEST);
    h = hb_join("a", "orders", NULL);
    h->rq.topic_partitions.n = -1;
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REQUEST);
    h = hb_join("a", NULL, NULL);
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REQUEST);
    h = hb_new("a", -3);
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REQUEST);
    h = hb_join("a", "orders", NULL);
    h->rq.server_assignor = KP_STR_LIT("sticky");
    ck_assert_int_eq(send(h, 0).err, KP_ERR_UNSUPPORTED_ASSIGNOR);
    h = hb_join("a", NULL, "orders[");
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REGULAR_EXPRESSION);
    h = hb_join("a", NULL, "(o)\\1");  /* back-references: not in RE2 */
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REGULAR_EXPRESSION);
    h = hb_join("a", NULL, "((a{1,100}){1,100})");  /* would expand 10000-fold */
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REGULAR_EXPRESSION);
    /* 513 bytes repeated {1000}: half a second and 570 MB in regcomp */
    static char wide[600];
    size_t n = (size_t)snprintf(wide, sizeof(wide), "((");
    for (int i = 0; i < 250; i++)
        n += (size_t)snprintf(wide + n, sizeof(wide) - n, "a|");
    snprintf(wide + n, sizeof(wide) - n, "b){1000})");
    h = hb_join("a", NULL, wide);
    ck_assert_int_eq(send(h, 0).err, KP_ERR_INVALID_REGULAR_EXPRESSION);
    ck_assert_int_eq(cg->group_epoch, 0); /* refused before any member was made */
    h = hb_join("a", NULL, "or{1,3}ders{0,1}");
    ck_assert_int_eq(send(h, 0).err, KP_ERR_NONE);
    ck_assert_int_eq(send(hb_new("a", -1), 0).err, KP_ERR_NONE);
    ck_assert_int_eq(cg->nmembers, 0);
    /* v0: the coordinator names the member. */
    h = hb_join("", "orders", NULL);
    kb_consumer_group_client cl = {KP_STR_LIT("c"), KP_STR_LIT("/h"), 0};
    kb_consumer_group_result r;
    ck_assert_int_eq(kb_consumer_group_heartbeat(cg, &env, &h->rq, &cl, 0, &r), KP_ERR_NONE);
    free(h);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_str_eq(r.member_id, "gen-1");
    /* group.consumer.max.size */
    env.max_size = 1;
    ck_assert_int_eq(send(hb_join("b", "orders", NULL), 0).err, KP_ERR_GROUP_MAX_SIZE_REACHED);
}
END_TEST

/* ---- time --------------------------------------------------------------- */

START_TEST(test_cgroup_session_expiry_fences)
{
    send(hb_join("a", "orders", NULL), 0);
    send(hb_join("b", "orders", NULL), 1000);
    ck_assert_int_eq(kb_consumer_group_next_deadline(cg), SESSION);
    kb_consumer_group_tick(cg, &env, SESSION - 1);
    ck_assert_int_eq(cg->nmembers, 2);
    kb_consumer_group_tick(cg, &env, SESSION);
    ck_assert_int_eq(cg->nmembers, 1); /* a expired: b's target is everything */
    ck_assert_int_eq(cg->group_epoch, 3);
    ck_assert_int_eq(cg->assignment_epoch, 3);
    kb_consumer_group_result r = send(hb_new("b", 2), SESSION + 1);
    ck_assert_int_eq(r.epoch, 3);
    ck_assert_int_eq(r.assignment->n, 6);
    ck_assert_int_eq(send(hb_new("a", 1), SESSION + 2).err, KP_ERR_UNKNOWN_MEMBER_ID);
}
END_TEST

START_TEST(test_cgroup_unrevoked_member_fenced_after_rebalance_timeout)
{
    send(hb_join("a", "orders", NULL), 0);
    send(hb_join("b", "orders", NULL), 1);
    send(hb_new("a", 1), 2); /* told to revoke; never acknowledges */
    ck_assert_int_eq(kb_consumer_group_next_deadline(cg), 2 + 30000);
    send(hb_new("b", 2), 20000);
    kb_consumer_group_tick(cg, &env, 30002);
    ck_assert_ptr_null(kb_consumer_group_member_find(cg, KP_STR_LIT("a")));
    kb_consumer_group_result r = send(hb_new("b", 2), 30003);
    ck_assert_int_eq(r.assignment->n, 6);
}
END_TEST

/* ---- static members, regex ---------------------------------------------- */

START_TEST(test_cgroup_static_member_replacement)
{
    hb *h = hb_join("s1", "orders", NULL);
    h->rq.instance_id = KP_STR_LIT("i1");
    ck_assert_int_eq(send(h, 0).err, KP_ERR_NONE);
    h = hb_join("s2", "orders", NULL);
    h->rq.instance_id = KP_STR_LIT("i1");
    ck_assert_int_eq(send(h, 1).err, KP_ERR_UNRELEASED_INSTANCE_ID);
    h = hb_new("s1", KB_CONSUMER_GROUP_STATIC_LEAVE_EPOCH);
    h->rq.instance_id = KP_STR_LIT("i1");
    kb_consumer_group_result r = send(h, 2);
    ck_assert_int_eq(r.epoch, -2);
    ck_assert_int_eq(owned_count("s1"), 6); /* kept for its return */
    h = hb_join("s2", "orders", NULL);
    h->rq.instance_id = KP_STR_LIT("i1");
    r = send(h, 3);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_int_eq(r.epoch, 1); /* no rebalance */
    ck_assert_int_eq(r.assignment->n, 6);
    ck_assert_int_eq(cg->group_epoch, 1);
    h = hb_new("s1", KB_CONSUMER_GROUP_LEAVE_EPOCH);
    h->rq.instance_id = KP_STR_LIT("i1");
    ck_assert_int_eq(send(h, 4).err, KP_ERR_FENCED_INSTANCE_ID);
}
END_TEST

START_TEST(test_cgroup_regex_subscription)
{
    kb_consumer_group_result r = send(hb_join("a", NULL, "or.*|_.*"), 0);
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert_int_eq(r.epoch, 1);
    ck_assert_int_eq(r.assignment->n, 0); /* the regex is resolved after this heartbeat */
    r = send(hb_new("a", 1), 5);
    ck_assert_int_eq(r.epoch, 2);
    ck_assert_int_eq(r.assignment->n, 6); /* orders; never __consumer_offsets */
    ck_assert(kb_consumer_group_subscribed_to(cg, KP_STR_LIT("orders")));
    ck_assert(!kb_consumer_group_subscribed_to(cg, KP_STR_LIT("audit")));
    add_topic("orders-eu", 2);
    r = send(hb_new("a", 2), 10); /* metadata is re-read at most every second */
    ck_assert(!r.with_assignment);
    r = send(hb_new("a", 2), 10 + KB_CONSUMER_GROUP_REFRESH_MS);
    ck_assert_int_eq(r.epoch, 3);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 8);
    /* A changed subscription (and the topic's new partition) bumps it too. */
    topics[1].np = 4;
    hb *h = hb_new("a", 3);
    h->names[0] = KP_STR_LIT("audit");
    h->rq.subscribed_topic_names.n = 1;
    h->rq.subscribed_topic_names.v = h->names;
    r = send(h, 20 + KB_CONSUMER_GROUP_REFRESH_MS);
    ck_assert_int_eq(r.epoch, 4);
    ck_assert_int_eq(r.assignment->n, 12);
}
END_TEST

/* Kafka resolves a new regex in the background after the heartbeat that
 * brought it: that heartbeat assigns the literal topics, the next one the
 * matches too. A regex another member has resolved already is shared. */
START_TEST(test_cgroup_regex_resolved_after_heartbeat)
{
    kb_consumer_group_result r = send(hb_join("a", "audit", "ord.*"), 0);
    ck_assert_int_eq(r.epoch, 1);
    ck_assert_int_eq(r.assignment->n, 3); /* audit only */
    const kb_cg_member *a = kb_consumer_group_member_find(cg, KP_STR_LIT("a"));
    ck_assert(!kb_cg_member_subscribes(a, "orders"));
    r = send(hb_new("a", 1), 100);
    ck_assert_int_eq(r.epoch, 2);
    ck_assert(r.with_assignment);
    ck_assert_int_eq(r.assignment->n, 9);
    ck_assert(kb_cg_member_subscribes(a, "orders"));
    r = send(hb_join("b", NULL, "ord.*"), 200);
    ck_assert_int_eq(r.epoch, 3); /* a new member: one bump, its regex shared at once */
    const kb_cg_member *b = kb_consumer_group_member_find(cg, KP_STR_LIT("b"));
    ck_assert(kb_cg_member_subscribes(b, "orders"));
    ck_assert_int_eq(cg->group_epoch, 3);
    /* Changing a regex starts over: b's new one waits for the next event. */
    hb *h = hb_new("b", 3);
    h->rq.subscribed_topic_regex = KP_STR_LIT("aud.*");
    r = send(h, 300);
    ck_assert(!kb_cg_member_subscribes(b, "audit") && !kb_cg_member_subscribes(b, "orders"));
    ck_assert_int_eq(cg->group_epoch, 4);
    r = send(hb_new("a", a->epoch), 400); /* any member's heartbeat resolves it */
    ck_assert_int_eq(r.err, KP_ERR_NONE);
    ck_assert(kb_cg_member_subscribes(b, "audit"));
    ck_assert_int_eq(cg->group_epoch, 5);
    check_exclusive();
}
END_TEST

/* ---- offsets ------------------------------------------------------------ */

START_TEST(test_cgroup_offset_checks)
{
    ck_assert_int_eq(kb_consumer_group_check_commit(cg, KP_STR_LIT(""), -1, 9, false), KP_ERR_NONE);
    send(hb_join("a", "orders", NULL), 0);
    ck_assert_int_eq(kb_consumer_group_check_commit(cg, KP_STR_LIT(""), -1, 9, false),
                     KP_ERR_UNKNOWN_MEMBER_ID);
    ck_assert_int_eq(kb_consumer_group_check_commit(cg, KP_STR_LIT("a"), 1, 9, false), KP_ERR_NONE);
    ck_assert_int_eq(kb_consumer_group_check_commit(cg, KP_STR_LIT("a"), 2, 9, false),
                     KP_ERR_STALE_MEMBER_EPOCH);
    ck_assert_int_eq(kb_consumer_group_check_commit(cg, KP_STR_LIT("a"), 1, 8, false),
                     KP_ERR_UNSUPPORTED_VERSION);
    ck_assert_int_eq(kb_consumer_group_check_commit(cg, KP_STR_LIT("a"), 1, 4, true), KP_ERR_NONE);
    ck_assert_int_eq(kb_consumer_group_check_fetch(cg, KP_STR_NULL, -1), KP_ERR_NONE);
    ck_assert_int_eq(kb_consumer_group_check_fetch(cg, KP_STR_LIT("a"), 0), KP_ERR_STALE_MEMBER_EPOCH);
    ck_assert_int_eq(kb_consumer_group_check_fetch(cg, KP_STR_LIT("x"), 1), KP_ERR_UNKNOWN_MEMBER_ID);
}
END_TEST

/* ---- records ------------------------------------------------------------ */

/* Records emitted so far: (key, value) bytes, value NULL for a tombstone. */
typedef struct rec {
    uint8_t *key, *value;
    size_t klen, vlen;
} rec;

static rec recs[256];
static int nrecs;

static void collect(void *arg, kp_writer *key, kp_writer *value)
{
    (void)arg;
    ck_assert_int_lt(nrecs, 256);
    rec *r = &recs[nrecs++];
    r->klen = key->len;
    r->key = malloc(key->len);
    memcpy(r->key, key->buf, key->len);
    r->value = NULL;
    if (value != NULL) {
        r->vlen = value->len;
        r->value = malloc(value->len);
        memcpy(r->value, value->buf, value->len);
        kp_writer_fini(value);
    }
    kp_writer_fini(key);
}

static void flush_records(void)
{
    ck_assert_int_eq(kb_consumer_group_rec_changes(cg, KP_STR_LIT("g"), collect, NULL), KP_ERR_NONE);
    kb_consumer_group_rec_written(cg);
}

/* A new group from every record so far, as the coordinator loads it. */
static kb_consumer_group *replay(int64_t now)
{
    kb_consumer_group *r = kb_consumer_group_new();
    kp_arena a;
    kp_arena_init(&a);
    for (int i = 0; i < nrecs; i++) {
        kb_offsets_key k;
        ck_assert_int_eq(kb_offsets_read_key((kp_slice){recs[i].key, (int32_t)recs[i].klen}, &a,
                                             &k),
                         KP_ERR_NONE);
        ck_assert_int_eq(k.type, KB_OFFSETS_KEY_CGROUP);
        kp_slice v = recs[i].value != NULL ? (kp_slice){recs[i].value, (int32_t)recs[i].vlen}
                                           : (kp_slice){NULL, -1};
        ck_assert_int_eq(kb_consumer_group_rec_load(r, &k, v, &a), KP_ERR_NONE);
    }
    kp_arena_fini(&a);
    ck_assert_int_eq(kb_consumer_group_restored(r, &env, now), KP_ERR_NONE);
    return r;
}

static void assert_same_member(const kb_cg_member *x, const kb_cg_member *y)
{
    ck_assert_str_eq(x->member_id, y->member_id);
    ck_assert_int_eq(x->epoch, y->epoch);
    ck_assert_int_eq(x->prev_epoch, y->prev_epoch);
    ck_assert_int_eq(x->state, y->state);
    ck_assert(kb_cg_set_eq(&x->assigned, &y->assigned));
    ck_assert(kb_cg_set_eq(&x->revoking, &y->revoking));
    ck_assert(kb_cg_set_eq(&x->target, &y->target));
    ck_assert_int_eq(x->ntopics, y->ntopics);
    ck_assert_int_eq(x->rebalance_timeout_ms, y->rebalance_timeout_ms);
    ck_assert((x->instance_id == NULL) == (y->instance_id == NULL));
}

START_TEST(test_cgroup_records_replay)
{
    nrecs = 0;
    hb *h = hb_join("a", "orders", NULL);
    h->rq.instance_id = KP_STR_LIT("ia");
    send(h, 0);
    flush_records();
    int first = nrecs;
    ck_assert_int_eq(first, 5); /* member, group epoch, target, target epoch, current */
    flush_records();
    ck_assert_int_eq(nrecs, first); /* nothing changed: nothing written */
    send(hb_join("b", "orders", NULL), 1);
    send(hb_new("a", 1), 2); /* a revoking */
    send(hb_join("c", NULL, "aud.*"), 3);
    send(hb_new("c", KB_CONSUMER_GROUP_LEAVE_EPOCH), 4); /* tombstones */
    flush_records();
    kb_consumer_group *r = replay(100);
    ck_assert_int_eq(r->group_epoch, cg->group_epoch);
    ck_assert_int_eq(r->assignment_epoch, cg->assignment_epoch);
    ck_assert_int_eq(r->nmembers, cg->nmembers);
    for (int i = 0; i < cg->nmembers; i++)
        assert_same_member(cg->members[i],
                           kb_consumer_group_member_find(r, kp_str_from(cg->members[i]->member_id)));
    ck_assert_ptr_null(kb_consumer_group_member_find(r, KP_STR_LIT("c")));
    ck_assert_int_eq(kb_consumer_group_state_of(r), KB_CGS_RECONCILING);
    ck_assert_int_eq(kb_consumer_group_next_deadline(r), 100 + 30000); /* a's revocation */
    /* The restored group goes on: a acknowledges, b gets its partitions. */
    kb_consumer_group *live = cg;
    int32_t epoch = r->group_epoch;
    cg = r;
    hb *ack = hb_new("a", 1);
    own_all(ack, "a", 0);
    ck_assert_int_eq(send(ack, 101).epoch, epoch);
    kb_consumer_group_result res = send(hb_new("b", kb_consumer_group_member_find(r, KP_STR_LIT("b"))->epoch), 102);
    ck_assert_int_eq(res.err, KP_ERR_NONE);
    ck_assert_int_eq(res.assignment->n, 3);
    ck_assert_int_eq(r->group_epoch, epoch); /* no bump for an unchanged group */
    cg = live;
    kb_consumer_group_free(r);
    for (int i = 0; i < nrecs; i++) {
        free(recs[i].key);
        free(recs[i].value);
    }
}
END_TEST

Suite *cgroup_suite(void)
{
    Suite *s = suite_create("cgroup");
    TCase *tc = tcase_create("consumer_protocol");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cgroup_uniform_balances_and_sticks);
    tcase_add_test(tc, test_cgroup_uniform_property);
    tcase_add_test(tc, test_cgroup_uniform_heterogeneous);
    tcase_add_test(tc, test_cgroup_range_contiguous_by_member_id);
    tcase_add_test(tc, test_cgroup_revoke_before_assign);
    tcase_add_test(tc, test_cgroup_epoch_errors);
    tcase_add_test(tc, test_cgroup_request_validation);
    tcase_add_test(tc, test_cgroup_session_expiry_fences);
    tcase_add_test(tc, test_cgroup_unrevoked_member_fenced_after_rebalance_timeout);
    tcase_add_test(tc, test_cgroup_static_member_replacement);
    tcase_add_test(tc, test_cgroup_regex_subscription);
    tcase_add_test(tc, test_cgroup_regex_resolved_after_heartbeat);
    tcase_add_test(tc, test_cgroup_offset_checks);
    tcase_add_test(tc, test_cgroup_records_replay);
    suite_add_tcase(s, tc);
    return s;
}
