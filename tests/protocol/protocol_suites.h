/* The Check suites of the protocol unit tests, one per module. */
#ifndef PROTOCOL_SUITES_H
#define PROTOCOL_SUITES_H

#include <check.h>

Suite *codec_suite(void);
Suite *compress_suite(void);
Suite *types_suite(void);
Suite *validate_suite(void);
Suite *records_suite(void);
Suite *golden_suite(void);

#endif
