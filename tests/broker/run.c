/* Runs every broker unit suite; exits non-zero on any failure. */
#include <check.h>
#include <stdlib.h>

#include "broker_suites.h"

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_add_suite(sr, props_suite());
    srunner_add_suite(sr, log_suite());
    srunner_add_suite(sr, lag_status_suite());
    srunner_add_suite(sr, group_suite());
    srunner_add_suite(sr, cgroup_suite());
    srunner_add_suite(sr, share_suite());
    srunner_add_suite(sr, share_state_suite());
    srunner_add_suite(sr, streams_group_suite());
    srunner_add_suite(sr, cluster_suite());
    srunner_add_suite(sr, meta_image_suite());
    srunner_add_suite(sr, pidstate_suite());
    srunner_add_suite(sr, pidsnap_suite());
    srunner_add_suite(sr, admin_suite());
    srunner_add_suite(sr, sasl_suite());
    srunner_add_suite(sr, topics_suite());
    srunner_add_suite(sr, txn_suite());
    srunner_add_suite(sr, acl_suite());
    srunner_add_suite(sr, conn_suite());
    srunner_add_suite(sr, map_suite());
    srunner_add_suite(sr, longpoll_suite());
    srunner_add_suite(sr, console_suite());
    srunner_add_suite(sr, forward_suite());
    srunner_add_suite(sr, http_suite());
    srunner_add_suite(sr, metrics_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
