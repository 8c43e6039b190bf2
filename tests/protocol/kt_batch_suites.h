/* Suites of the record batch / CRC-32C test runner (run_batch.c). */
#ifndef KT_BATCH_SUITES_H
#define KT_BATCH_SUITES_H

#include <check.h>

Suite *crc32c_suite(void);
Suite *batch_suite(void);

#endif
