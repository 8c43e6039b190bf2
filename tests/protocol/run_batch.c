/* Runner for the record batch header and CRC-32C suites. */
#include <check.h>
#include <stdlib.h>

#include "kt_batch_suites.h"

int main(void)
{
    SRunner *sr = srunner_create(crc32c_suite());
    srunner_add_suite(sr, batch_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
