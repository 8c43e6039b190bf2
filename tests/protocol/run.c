/* Runs every protocol unit suite; exits non-zero on any failure. */
#include <check.h>
#include <stdlib.h>

#include "protocol_suites.h"

int main(void)
{
    SRunner *sr = srunner_create(codec_suite());
    srunner_add_suite(sr, types_suite());
    srunner_add_suite(sr, compress_suite());
    srunner_add_suite(sr, validate_suite());
    srunner_add_suite(sr, records_suite());
    srunner_add_suite(sr, golden_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
