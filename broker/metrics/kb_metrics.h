/*
 * kb_metrics: the registry of metric families and their labelled series.
 *
 * Job: hold counters, gauges and histograms (fixed bucket bounds), each a
 * family of series told apart by their label values, under one cap on the
 * number of series; write them all in the Prometheus text format (kb_prom).
 * Counting is a plain add to a series the caller found once and kept, so
 * the hot path neither allocates nor hashes.
 *
 * Invariants:
 *   1. At most max_series series exist in all families together; a
 *      kb_metric_get that would create one more returns NULL and adds 1 to
 *      the dropped count (written as runnel_metrics_series_dropped_total).
 *      Every kb_metric_* update accepts NULL and does nothing, so a caller
 *      never tests for a dropped series.
 *   2. One series per (family, label values); label values are kept
 *      unescaped for lookup and escaped once, at creation, for writing.
 *   3. A histogram series has one count per bound plus +Inf, each counting
 *      observations <= its bound and > the bound before (written
 *      cumulatively, as the format wants).
 *   4. Families and series are written in the order they were made.
 *
 * Ownership: the registry owns families and series. Names, help texts,
 * label names and bounds given to kb_metrics_family are borrowed and must
 * outlive the registry (static strings). A series pointer stays valid
 * until kb_metric_family_clear on its family or kb_metrics_free.
 *
 * Threading: one thread (the event loop's).
 *
 * Errors: NULL from kb_metrics_new / kb_metrics_family / kb_metric_get when
 * out of memory (or, for kb_metric_get, at the cap).
 */
#ifndef KB_METRICS_H
#define KB_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_prom.h"

#define KB_METRIC_LABELS_MAX  4
#define KB_METRIC_BUCKETS_MAX 24

typedef enum kb_metric_type {
    KB_METRIC_COUNTER,
    KB_METRIC_GAUGE,
    KB_METRIC_HISTOGRAM,
} kb_metric_type;

typedef struct kb_metrics kb_metrics;
typedef struct kb_metric_family kb_metric_family;

typedef struct kb_metric_series {
    double value;   /* counter, gauge */
    double sum;     /* histogram: sum of observations */
    uint64_t count; /* histogram: number of observations */
    /* the registry's own */
    kb_metric_family *ms_family;
    uint64_t ms_hash;
    char *ms_key;    /* label values joined by '\x1f' */
    char *ms_labels; /* `a="x",b="y"` escaped, no braces */
    uint64_t ms_buckets[]; /* histogram: n_bounds + 1 counts */
} kb_metric_series;

kb_metrics *kb_metrics_new(size_t max_series);
void kb_metrics_free(kb_metrics *m);

/* Registers a family (or returns the one of that name). n_labels <=
 * KB_METRIC_LABELS_MAX; bounds (histograms only) increasing, n_bounds <=
 * KB_METRIC_BUCKETS_MAX. */
kb_metric_family *kb_metrics_family(kb_metrics *m, const char *name, const char *help,
                                    kb_metric_type type, size_t n_labels,
                                    const char *const *label_names, const double *bounds,
                                    size_t n_bounds);

/* The series with these label values (n_labels of them), made if new;
 * values NULL is the family's series without labels (an all-topics total
 * beside the per-topic series, as Kafka's JMX exporter writes them).
 * NULL past the cap (counted) or out of memory. */
kb_metric_series *kb_metric_get(kb_metric_family *f, const char *const *values);
/* Removes every series of f (for gauges rebuilt at each scrape). */
void kb_metric_family_clear(kb_metric_family *f);

static inline void kb_metric_add(kb_metric_series *s, double v)
{
    if (s != NULL) {
        s->value += v;
    }
}

static inline void kb_metric_set(kb_metric_series *s, double v)
{
    if (s != NULL) {
        s->value = v;
    }
}

void kb_metric_observe(kb_metric_series *s, double v);

size_t kb_metrics_series_count(const kb_metrics *m);
uint64_t kb_metrics_dropped(const kb_metrics *m);
size_t kb_metrics_max_series(const kb_metrics *m);

/* Writes every family, then the registry's own metrics
 * (runnel_metrics_series, runnel_metrics_series_dropped_total). */
bool kb_metrics_write(const kb_metrics *m, kb_prom_out *o);

#endif
