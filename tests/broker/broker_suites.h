/* The Check suites of the broker unit tests, one per module. */
#ifndef BROKER_SUITES_H
#define BROKER_SUITES_H

#include <check.h>
#include <stdint.h>

#include "ks_log.h"

Suite *acl_suite(void);
Suite *admin_suite(void);
Suite *cgroup_suite(void);
Suite *cluster_suite(void);
Suite *config_suite(void);
Suite *conn_suite(void);
Suite *console_suite(void);
Suite *forward_suite(void);
Suite *group_suite(void);
Suite *http_suite(void);
Suite *lag_status_suite(void);
Suite *log_suite(void);
Suite *longpoll_suite(void);
Suite *map_suite(void);
Suite *meta_image_suite(void);
Suite *metrics_suite(void);
Suite *props_suite(void);
Suite *pidsnap_suite(void);
Suite *pidstate_suite(void);
Suite *sasl_suite(void);
Suite *share_suite(void);
Suite *share_state_suite(void);
Suite *streams_group_suite(void);
Suite *topics_suite(void);
Suite *txn_suite(void);

/* Runs fn with stderr sent to a temporary file; returns what it wrote
 * (a static buffer, overwritten by the next call). In test_log.c. */
const char *capture_stderr(void (*fn)(void));

/* Appends one batch of n records ("k", "v") to log, of producer pid at
 * epoch from sequence seq (-1s: not idempotent). In test_producer_state.c. */
void append_idempotent(ks_log *log, int64_t pid, int16_t epoch, int32_t seq, int n);

#endif
