/*
 * kb_observe: the Prometheus endpoint, `runnel.metrics.listener`.
 *
 * Job: when the key is set, make the metrics registry (capped by
 * runnel.metrics.max.series) and the request pipeline's counters
 * (kb_req_metrics), and serve `GET /metrics` on the event loop through
 * kb_http_server: each scrape first rebuilds the gauges read from the
 * broker's state (partitions, log sizes and offsets, connections per
 * listener, consumer group offsets, lag in records and seconds, the lag
 * verdicts of kb_lag, members, the retention guard's counts), then writes the
 * whole registry in the text format 0.0.4. Names follow Kafka's common
 * JMX-exporter rules and kafka_exporter (docs/metrics.md lists them).
 *
 * Invariants:
 *   1. With the key unset nothing is made: b->metrics, b->req_metrics and
 *      b->observe stay NULL and the broker counts nothing.
 *   2. A scrape reads only in-memory state (no I/O, no helper thread): a
 *      partition whose log is not open yet is left out of the log gauges
 *      (counted in kafka_server_replicamanager_offlinereplicacount while a
 *      helper thread opens it at start-up).
 *   3. Lag is the partition's high watermark minus the committed offset,
 *      never below 0.
 *
 * Ownership: kb_observe_start fills b->metrics, b->req_metrics and
 * b->observe; kb_observe_stop frees them.
 *
 * Threading: the loop's thread.
 *
 * Errors: kb_observe_start returns kb_http_server_start's errors (a bad
 * URL, an address in use; text in err) or KP_ERR__NOMEM.
 */
#ifndef KB_OBSERVE_H
#define KB_OBSERVE_H

#include <stddef.h>
#include <stdint.h>

#include "kb_context.h"
#include "kp_err.h"

kp_err kb_observe_start(kb_broker *b, char *err, size_t errlen);
void kb_observe_stop(kb_broker *b);
/* The bound port of the metrics listener (0 when off). */
uint16_t kb_observe_port(const kb_broker *b);

#endif
