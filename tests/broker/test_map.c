/* kb_map: against a reference array over random inserts and removes, with
 * colliding hashes, removal during a visit, and tombstone reuse. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "broker_suites.h"
#include "kb_map.h"

#define NKEYS 4096

typedef struct item {
    int key;
} item;

static bool item_is(const void *entry, const void *key)
{
    return ((const item *)entry)->key == *(const int *)key;
}

/* Few distinct hash values, so probes run long and cross each other. */
static uint64_t weak_hash(int key)
{
    return (uint64_t)(key % 7) * 0x9E3779B97F4A7C15ull;
}

static uint64_t strong_hash(int key)
{
    return kb_map_hash_bytes(&key, sizeof key);
}

static void random_ops(uint64_t (*hash)(int))
{
    static item items[NKEYS];
    bool in[NKEYS] = {false};
    size_t count = 0;
    kb_map m;
    kb_map_init(&m);
    srand(7);
    for (int step = 0; step < 40000; step++) {
        int k = rand() % NKEYS;
        items[k].key = k;
        if (!in[k] && rand() % 3 != 0) {
            ck_assert_ptr_null(kb_map_find(&m, hash(k), &k, item_is));
            ck_assert_int_eq(kb_map_insert(&m, hash(k), &items[k]), KP_ERR_NONE);
            in[k] = true;
            count++;
        } else if (in[k]) {
            ck_assert_ptr_eq(kb_map_remove(&m, hash(k), &k, item_is), &items[k]);
            in[k] = false;
            count--;
        } else {
            ck_assert_ptr_null(kb_map_remove(&m, hash(k), &k, item_is));
        }
        ck_assert_uint_eq(kb_map_count(&m), count);
        ck_assert(m.used * 4 <= m.cap * 3);
    }
    for (int k = 0; k < NKEYS; k++)
        ck_assert_ptr_eq(kb_map_find(&m, hash(k), &k, item_is), in[k] ? &items[k] : NULL);
    kb_map_fini(&m);
}

START_TEST(test_map_matches_a_reference)
{
    random_ops(strong_hash);
    random_ops(weak_hash);
}
END_TEST

START_TEST(test_map_visit_may_remove_what_it_was_given)
{
    static item items[1000];
    kb_map m;
    kb_map_init(&m);
    for (int k = 0; k < 1000; k++) {
        items[k].key = k;
        ck_assert_int_eq(kb_map_insert(&m, weak_hash(k), &items[k]), KP_ERR_NONE);
    }
    int seen[1000] = {0};
    size_t cursor = 0;
    for (item *it; (it = kb_map_next(&m, &cursor)) != NULL;) {
        seen[it->key]++;
        if (it->key % 2 == 0)
            ck_assert(kb_map_remove_entry(&m, weak_hash(it->key), it));
    }
    for (int k = 0; k < 1000; k++) {
        ck_assert_int_eq(seen[k], 1);
        ck_assert_ptr_eq(kb_map_find(&m, weak_hash(k), &k, item_is), k % 2 ? &items[k] : NULL);
    }
    ck_assert_uint_eq(kb_map_count(&m), 500);
    kb_map_fini(&m);
}
END_TEST

START_TEST(test_map_reuses_tombstones_without_growing)
{
    static item items[8];
    kb_map m;
    kb_map_init(&m);
    for (int k = 0; k < 8; k++)
        items[k].key = k;
    ck_assert_int_eq(kb_map_insert(&m, strong_hash(0), &items[0]), KP_ERR_NONE);
    size_t cap = m.cap;
    for (int round = 0; round < 10000; round++) {
        int k = 1 + round % 7;
        ck_assert_int_eq(kb_map_insert(&m, strong_hash(k), &items[k]), KP_ERR_NONE);
        ck_assert(kb_map_remove_entry(&m, strong_hash(k), &items[k]));
    }
    ck_assert_uint_eq(m.cap, cap); /* churn of one entry never grows the map */
    ck_assert_uint_eq(kb_map_count(&m), 1);
    int zero = 0;
    ck_assert_ptr_eq(kb_map_find(&m, strong_hash(0), &zero, item_is), &items[0]);
    kb_map_fini(&m);
}
END_TEST

Suite *map_suite(void)
{
    Suite *s = suite_create("map");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_map_matches_a_reference);
    tcase_add_test(tc, test_map_visit_may_remove_what_it_was_given);
    tcase_add_test(tc, test_map_reuses_tombstones_without_growing);
    suite_add_tcase(s, tc);
    return s;
}
