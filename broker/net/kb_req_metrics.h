/*
 * kb_req_metrics: what the request pipeline's finish step counts.
 *
 * Job: for every finished request, count it per API
 * (kafka_network_requestmetrics_requests_total{request}) and record its
 * latency histograms (totaltimems, requestqueuetimems, localtimems,
 * remotetimems, responsesendtimems); for Produce and Fetch, the per-topic
 * and all-topics broker topic counters
 * (kafka_server_brokertopicmetrics_*_total) read from the request and
 * response structs the finish step holds; the latest throttle time per
 * user and client (kafka_server_quota_throttle_time).
 *
 * Invariants:
 *   1. Nothing is counted unless the metrics listener is on (b->req_metrics
 *      is NULL otherwise): the finish step then pays one NULL test.
 *   2. The hot path does not allocate: an API's series are looked up once,
 *      at its first request, and kept; a topic's are found by one hash of
 *      its name in this module's map, made once, for topics that exist only
 *      (a client naming unknown topics adds nothing but the all-topics
 *      counts), and bounded by runnel.metrics.max.series.
 *   3. Latencies: total = finish - dispatch (a held response's throttle
 *      included); remote = the part the request spent parked (a long-poll
 *      Fetch, an acks=all flush, a helper thread); local = total - remote -
 *      throttle; queue = 0 (a request is dispatched as its frame completes)
 *      and send = 0 (the finish step queues the response; its write is not
 *      timed). Milliseconds, as Kafka's.
 *   4. messagesin counts records of the batches a Produce partition
 *      appended (its error_code 0), bytesin their bytes; a failed partition
 *      adds its bytes to bytesrejected and counts one failedproducerequests
 *      for its topic per request; bytesout is the record bytes a Fetch
 *      answered with.
 *
 * Ownership: the module owns its topic map; series belong to the registry.
 *
 * Threading: the loop's thread.
 *
 * Errors: kb_req_metrics_new returns NULL out of memory.
 */
#ifndef KB_REQ_METRICS_H
#define KB_REQ_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "kb_metrics.h"
#include "kb_req.h"

typedef struct kb_req_metrics kb_req_metrics;

kb_req_metrics *kb_req_metrics_new(kb_metrics *m);
void kb_req_metrics_free(kb_req_metrics *rm);

/* Called by kb_req_finish once per request, before its response is sent. */
void kb_req_metrics_finish(kb_req *req, bool parked, int64_t throttle_ms);

#endif
