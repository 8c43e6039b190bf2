/* Suites of the storage test runner (run.c), one per module. */
#ifndef STORAGE_SUITES_H
#define STORAGE_SUITES_H

#include <check.h>

Suite *io_suite(void);
Suite *index_suite(void);
Suite *log_suite(void);
Suite *recover_suite(void);
Suite *checkpoint_suite(void);
Suite *retention_suite(void);
Suite *flush_suite(void);
Suite *compact_suite(void);
Suite *epoch_cache_suite(void);

#endif
