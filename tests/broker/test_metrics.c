/* Unit tests of kb_prom (escaping, values) and kb_metrics (series, cap,
 * the text exposition written). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker_suites.h"
#include "kb_metrics.h"
#include "kb_prom.h"

static char text[65536];
static size_t text_len;

static bool to_text(void *arg, const char *data, size_t len)
{
    (void)arg;
    if (text_len + len >= sizeof text) {
        return false;
    }
    memcpy(text + text_len, data, len);
    text_len += len;
    text[text_len] = '\0';
    return true;
}

static const char *written(const kb_metrics *m)
{
    text_len = 0;
    text[0] = '\0';
    kb_prom_out o = {to_text, NULL, true};
    ck_assert(kb_metrics_write(m, &o));
    return text;
}

START_TEST(test_metrics_escape_label_values)
{
    char out[64];
    ck_assert_uint_eq(kb_prom_escape_label("plain", out, sizeof out), 5);
    ck_assert_str_eq(out, "plain");
    kb_prom_escape_label("a\"b\\c\nd", out, sizeof out);
    ck_assert_str_eq(out, "a\\\"b\\\\c\\nd");
    ck_assert_uint_eq(kb_prom_escape_label("\"\"\"\"", out, 4), 8); /* cut, says the need */
    ck_assert_str_eq(out, "\\\"\\");
    kb_prom_escape_label("ünïcode", out, sizeof out);
    ck_assert_str_eq(out, "ünïcode");
}
END_TEST

START_TEST(test_metrics_format_values)
{
    char out[40];
    kb_prom_format_value(42, out, sizeof out);
    ck_assert_str_eq(out, "42");
    kb_prom_format_value(-3, out, sizeof out);
    ck_assert_str_eq(out, "-3");
    kb_prom_format_value(0.25, out, sizeof out);
    ck_assert_str_eq(out, "0.25");
    kb_prom_format_value(1.0 / 0.0, out, sizeof out);
    ck_assert_str_eq(out, "+Inf");
    kb_prom_format_value(-1.0 / 0.0, out, sizeof out);
    ck_assert_str_eq(out, "-Inf");
    kb_prom_format_value(nan(""), out, sizeof out);
    ck_assert_str_eq(out, "NaN");
    kb_prom_format_value(18446744073709551616.0, out, sizeof out);
    ck_assert_double_eq(strtod(out, NULL), 18446744073709551616.0);
    ck_assert(kb_prom_name_ok("kafka_log_log_size"));
    ck_assert(kb_prom_name_ok("a:b_c1"));
    ck_assert(!kb_prom_name_ok("1abc"));
    ck_assert(!kb_prom_name_ok("a-b"));
    ck_assert(!kb_prom_name_ok(""));
}
END_TEST

static const char *const topic_label[] = {"topic"};

START_TEST(test_metrics_counter_and_gauge_text)
{
    kb_metrics *m = kb_metrics_new(100);
    kb_metric_family *c = kb_metrics_family(m, "x_bytes_total", "Bytes in\nand \\ out",
                                            KB_METRIC_COUNTER, 1, topic_label, NULL, 0);
    kb_metric_family *g = kb_metrics_family(m, "x_up", "Up", KB_METRIC_GAUGE, 0, NULL, NULL, 0);
    ck_assert_ptr_eq(kb_metrics_family(m, "x_up", "Up", KB_METRIC_GAUGE, 0, NULL, NULL, 0), g);
    const char *t1[] = {"t\"1"};
    kb_metric_add(kb_metric_get(c, NULL), 7); /* the family's unlabelled total */
    kb_metric_series *s = kb_metric_get(c, t1);
    ck_assert_ptr_eq(kb_metric_get(c, t1), s);
    kb_metric_add(s, 10);
    kb_metric_add(s, 5);
    kb_metric_set(kb_metric_get(g, NULL), 1);
    ck_assert_str_eq(written(m), "# HELP x_bytes_total Bytes in\\nand \\\\ out\n"
                                 "# TYPE x_bytes_total counter\n"
                                 "x_bytes_total 7\n"
                                 "x_bytes_total{topic=\"t\\\"1\"} 15\n"
                                 "# HELP x_up Up\n"
                                 "# TYPE x_up gauge\n"
                                 "x_up 1\n"
                                 "# HELP runnel_metrics_series Metric series held (all families)\n"
                                 "# TYPE runnel_metrics_series gauge\n"
                                 "runnel_metrics_series 3\n"
                                 "# HELP runnel_metrics_series_dropped_total Series not made "
                                 "because runnel.metrics.max.series was reached\n"
                                 "# TYPE runnel_metrics_series_dropped_total counter\n"
                                 "runnel_metrics_series_dropped_total 0\n");
    kb_metrics_free(m);
}
END_TEST

START_TEST(test_metrics_histogram_cumulative_buckets)
{
    kb_metrics *m = kb_metrics_new(100);
    static const double bounds[] = {1, 5, 10};
    static const char *const req_label[] = {"request"};
    kb_metric_family *h = kb_metrics_family(m, "lat_ms", "Latency", KB_METRIC_HISTOGRAM, 1,
                                            req_label, bounds, 3);
    const char *v[] = {"Produce"};
    kb_metric_series *s = kb_metric_get(h, v);
    kb_metric_observe(s, 0.5);
    kb_metric_observe(s, 1);
    kb_metric_observe(s, 7);
    kb_metric_observe(s, 100);
    const char *t = written(m);
    ck_assert_ptr_nonnull(strstr(t, "# TYPE lat_ms histogram\n"
                                    "lat_ms_bucket{request=\"Produce\",le=\"1\"} 2\n"
                                    "lat_ms_bucket{request=\"Produce\",le=\"5\"} 2\n"
                                    "lat_ms_bucket{request=\"Produce\",le=\"10\"} 3\n"
                                    "lat_ms_bucket{request=\"Produce\",le=\"+Inf\"} 4\n"
                                    "lat_ms_sum{request=\"Produce\"} 108.5\n"
                                    "lat_ms_count{request=\"Produce\"} 4\n"));
    kb_metrics_free(m);
}
END_TEST

START_TEST(test_metrics_series_cap_counts_dropped)
{
    kb_metrics *m = kb_metrics_new(3);
    kb_metric_family *c =
        kb_metrics_family(m, "y_total", "Y", KB_METRIC_COUNTER, 1, topic_label, NULL, 0);
    char name[16];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "t%d", i);
        const char *v[] = {name};
        kb_metric_add(kb_metric_get(c, v), 1); /* NULL past the cap: a no-op */
    }
    ck_assert_uint_eq(kb_metrics_series_count(m), 3);
    ck_assert_uint_eq(kb_metrics_dropped(m), 7);
    const char *t = written(m);
    ck_assert_ptr_nonnull(strstr(t, "y_total{topic=\"t2\"} 1\n"));
    ck_assert_ptr_null(strstr(t, "t3"));
    ck_assert_ptr_nonnull(strstr(t, "runnel_metrics_series_dropped_total 7\n"));
    kb_metric_family_clear(c);
    ck_assert_uint_eq(kb_metrics_series_count(m), 0);
    const char *v[] = {"again"};
    ck_assert_ptr_nonnull(kb_metric_get(c, v));
    kb_metrics_free(m);
}
END_TEST

Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("metrics");
    tcase_add_test(tc, test_metrics_escape_label_values);
    tcase_add_test(tc, test_metrics_format_values);
    tcase_add_test(tc, test_metrics_counter_and_gauge_text);
    tcase_add_test(tc, test_metrics_histogram_cumulative_buckets);
    tcase_add_test(tc, test_metrics_series_cap_counts_dropped);
    suite_add_tcase(s, tc);
    return s;
}
