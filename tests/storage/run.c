/* Runner for the storage suites; CK_RUN_SUITE / CK_RUN_CASE select. */
#include <check.h>
#include <stdlib.h>

#include "storage_suites.h"

int main(void)
{
    SRunner *sr = srunner_create(log_suite());
    srunner_add_suite(sr, io_suite());
    srunner_add_suite(sr, index_suite());
    srunner_add_suite(sr, recover_suite());
    srunner_add_suite(sr, checkpoint_suite());
    srunner_add_suite(sr, retention_suite());
    srunner_add_suite(sr, flush_suite());
    srunner_add_suite(sr, compact_suite());
    srunner_add_suite(sr, epoch_cache_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
