/* kb_metrics: see kb_metrics.h. */
#include "kb_metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_map.h"

struct kb_metric_family {
    kb_metrics *reg;
    const char *name, *help;
    kb_metric_type type;
    size_t n_labels;
    const char *labels[KB_METRIC_LABELS_MAX];
    double bounds[KB_METRIC_BUCKETS_MAX];
    size_t n_bounds;
    kb_metric_series **series;
    size_t n_series, cap_series;
};

struct kb_metrics {
    kb_metric_family **families;
    size_t n_families, cap_families;
    kb_map series; /* (family, label values) -> series */
    size_t n_series, max_series;
    uint64_t dropped;
};

typedef struct series_key {
    const kb_metric_family *family;
    const char *key;
} series_key;

static bool grow(void *pp, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) {
        return true;
    }
    size_t ncap = *cap ? *cap * 2 : 8;
    void *p = realloc(*(void **)pp, ncap * elem);
    if (p == NULL) {
        return false;
    }
    *(void **)pp = p;
    *cap = ncap;
    return true;
}

kb_metrics *kb_metrics_new(size_t max_series)
{
    kb_metrics *m = calloc(1, sizeof *m);
    if (m != NULL) {
        kb_map_init(&m->series);
        m->max_series = max_series;
    }
    return m;
}

static void series_free(kb_metric_series *s)
{
    free(s->ms_key);
    free(s->ms_labels);
    free(s);
}

void kb_metric_family_clear(kb_metric_family *f)
{
    for (size_t i = 0; i < f->n_series; i++) {
        kb_metric_series *s = f->series[i];
        kb_map_remove_entry(&f->reg->series, s->ms_hash, s);
        series_free(s);
    }
    f->reg->n_series -= f->n_series;
    f->n_series = 0;
}

void kb_metrics_free(kb_metrics *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->n_families; i++) {
        kb_metric_family_clear(m->families[i]);
        free(m->families[i]->series);
        free(m->families[i]);
    }
    free(m->families);
    kb_map_fini(&m->series);
    free(m);
}

kb_metric_family *kb_metrics_family(kb_metrics *m, const char *name, const char *help,
                                    kb_metric_type type, size_t n_labels,
                                    const char *const *label_names, const double *bounds,
                                    size_t n_bounds)
{
    for (size_t i = 0; i < m->n_families; i++) {
        if (strcmp(m->families[i]->name, name) == 0) {
            return m->families[i];
        }
    }
    kb_metric_family *f = calloc(1, sizeof *f);
    if (n_labels > KB_METRIC_LABELS_MAX || n_bounds > KB_METRIC_BUCKETS_MAX || f == NULL ||
        !grow(&m->families, &m->cap_families, m->n_families, sizeof *m->families)) {
        free(f);
        return NULL;
    }
    *f = (kb_metric_family){.reg = m, .name = name, .help = help, .type = type,
                            .n_labels = n_labels, .n_bounds = n_bounds};
    if (n_labels > 0) {
        memcpy(f->labels, label_names, n_labels * sizeof *label_names);
    }
    if (n_bounds > 0) {
        memcpy(f->bounds, bounds, n_bounds * sizeof *bounds);
    }
    m->families[m->n_families++] = f;
    return f;
}

static bool series_match(const void *entry, const void *key)
{
    const kb_metric_series *s = entry;
    const series_key *k = key;
    return s->ms_family == k->family && strcmp(s->ms_key, k->key) == 0;
}

/* Label values joined by '\x1f' (a byte no topic or group name holds);
 * "" for the family's unlabelled series (values NULL). */
static char *join_values(const kb_metric_family *f, const char *const *values)
{
    size_t len = 1, n = values != NULL ? f->n_labels : 0;
    for (size_t i = 0; i < n; i++) {
        len += strlen(values[i]) + 1;
    }
    char *key = malloc(len), *w = key;
    for (size_t i = 0; key != NULL && i < n; i++) {
        size_t vlen = strlen(values[i]);
        memcpy(w, values[i], vlen);
        w += vlen;
        *w++ = '\x1f';
    }
    if (key != NULL) {
        *w = '\0';
    }
    return key;
}

typedef struct grow_buf {
    char *p;
    size_t len, cap;
    bool failed;
} grow_buf;

static bool to_grow_buf(void *arg, const char *data, size_t len)
{
    grow_buf *b = arg;
    if (b->len + len + 1 > b->cap) {
        size_t cap = (b->len + len + 1) * 2;
        char *p = realloc(b->p, cap);
        if (p == NULL) {
            b->failed = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = '\0';
    return true;
}

/* `a="x",b="y"`: the label set without its braces. */
static char *format_labels(const kb_metric_family *f, const char *const *values)
{
    grow_buf b = {0};
    kb_prom_out o = {to_grow_buf, &b, true};
    kb_prom_labels(&o, values != NULL ? f->n_labels : 0, f->labels, values);
    if (b.failed) {
        free(b.p);
        return NULL;
    }
    if (b.p == NULL) {
        return calloc(1, 1);
    }
    memmove(b.p, b.p + 1, b.len - 2); /* drop '{' and '}' */
    b.p[b.len - 2] = '\0';
    return b.p;
}

static kb_metric_series *series_new(kb_metric_family *f, const char *const *values, char *key,
                                    uint64_t hash)
{
    size_t nb = f->type == KB_METRIC_HISTOGRAM ? f->n_bounds + 1 : 0;
    kb_metric_series *s = calloc(1, sizeof *s + nb * sizeof s->ms_buckets[0]);
    char *labels = format_labels(f, values);
    if (s == NULL || labels == NULL ||
        !grow(&f->series, &f->cap_series, f->n_series, sizeof *f->series) ||
        kb_map_insert(&f->reg->series, hash, s) != KP_ERR_NONE) {
        free(s);
        free(labels);
        free(key);
        return NULL;
    }
    s->ms_family = f;
    s->ms_hash = hash;
    s->ms_key = key;
    s->ms_labels = labels;
    f->series[f->n_series++] = s;
    f->reg->n_series++;
    return s;
}

kb_metric_series *kb_metric_get(kb_metric_family *f, const char *const *values)
{
    if (f == NULL) {
        return NULL;
    }
    char *key = join_values(f, values);
    if (key == NULL) {
        return NULL;
    }
    uintptr_t fam = (uintptr_t)f;
    uint64_t hash = kb_map_hash_more(kb_map_mix((uint64_t)fam), key, strlen(key));
    series_key k = {f, key};
    kb_metric_series *s = kb_map_find(&f->reg->series, hash, &k, series_match);
    if (s != NULL) {
        free(key);
        return s;
    }
    if (f->reg->n_series >= f->reg->max_series) {
        f->reg->dropped++;
        free(key);
        return NULL;
    }
    return series_new(f, values, key, hash);
}

void kb_metric_observe(kb_metric_series *s, double v)
{
    if (s == NULL || s->ms_family->type != KB_METRIC_HISTOGRAM) {
        return;
    }
    const kb_metric_family *f = s->ms_family;
    size_t i = 0;
    while (i < f->n_bounds && v > f->bounds[i]) {
        i++;
    }
    s->ms_buckets[i]++;
    s->sum += v;
    s->count++;
}

size_t kb_metrics_series_count(const kb_metrics *m)
{
    return m->n_series;
}

uint64_t kb_metrics_dropped(const kb_metrics *m)
{
    return m->dropped;
}

size_t kb_metrics_max_series(const kb_metrics *m)
{
    return m->max_series;
}

static const char *type_name(kb_metric_type t)
{
    return t == KB_METRIC_COUNTER ? "counter" : t == KB_METRIC_GAUGE ? "gauge" : "histogram";
}

/* "name+suffix{labels,extra} value\n"; braces only around a non-empty set. */
static void sample_line(kb_prom_out *o, const kb_metric_family *f, const char *suffix,
                        const char *labels, const char *extra, double value)
{
    kb_prom_put(o, f->name, strlen(f->name));
    kb_prom_put(o, suffix, strlen(suffix));
    bool any = labels[0] != '\0' || extra[0] != '\0';
    kb_prom_put(o, "{", any ? 1 : 0);
    kb_prom_put(o, labels, strlen(labels));
    kb_prom_put(o, ",", labels[0] != '\0' && extra[0] != '\0' ? 1 : 0);
    kb_prom_put(o, extra, strlen(extra));
    kb_prom_sample(o, any ? "}" : "", "", "", value);
}

static void write_histogram(const kb_metric_family *f, const kb_metric_series *s,
                            kb_prom_out *o)
{
    char le[64], num[40];
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= f->n_bounds; i++) {
        cumulative += s->ms_buckets[i];
        kb_prom_format_value(i < f->n_bounds ? f->bounds[i] : 1.0 / 0.0, num, sizeof num);
        snprintf(le, sizeof le, "le=\"%s\"", num);
        sample_line(o, f, "_bucket", s->ms_labels, le, (double)cumulative);
    }
    sample_line(o, f, "_sum", s->ms_labels, "", s->sum);
    sample_line(o, f, "_count", s->ms_labels, "", (double)s->count);
}

static void write_family(const kb_metric_family *f, kb_prom_out *o)
{
    kb_prom_family_head(o, f->name, f->help, type_name(f->type));
    for (size_t i = 0; i < f->n_series && o->ok; i++) {
        const kb_metric_series *s = f->series[i];
        if (f->type == KB_METRIC_HISTOGRAM) {
            write_histogram(f, s, o);
        } else {
            sample_line(o, f, "", s->ms_labels, "", s->value);
        }
    }
}

bool kb_metrics_write(const kb_metrics *m, kb_prom_out *o)
{
    for (size_t i = 0; i < m->n_families && o->ok; i++) {
        write_family(m->families[i], o);
    }
    kb_prom_family_head(o, "runnel_metrics_series", "Metric series held (all families)", "gauge");
    kb_prom_sample(o, "runnel_metrics_series", "", "", (double)m->n_series);
    kb_prom_family_head(o, "runnel_metrics_series_dropped_total",
                        "Series not made because runnel.metrics.max.series was reached",
                        "counter");
    return kb_prom_sample(o, "runnel_metrics_series_dropped_total", "", "", (double)m->dropped);
}
