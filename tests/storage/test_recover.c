#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kp_batch.h"
#include "ks_log.h"
#include "kt_storage.h"
#include "storage_suites.h"

typedef struct pristine {
    char path[512];   /* the last segment's .log */
    uint8_t *bytes;   /* its content */
    size_t len;
    int64_t base;     /* its base offset */
} pristine;

/* Builds a multi-segment log and saves the last segment's bytes. */
static ks_log *build(ks_log_config *cfg, kt_model *m, pristine *p)
{
    kt_small_config(cfg, 2048, 256);
    ks_log *log = kt_open(kt_io(), kt_dir(), cfg, false, 0, NULL);
    kt_model_fill(log, m, 60, 5000, 21);
    ks_segment *seg;
    ck_assert_int_eq(ks_log_segment_at(log, ks_log_segment_count(log) - 1, &seg, NULL),
                     KP_ERR_NONE);
    snprintf(p->path, sizeof(p->path), "%s.log", seg->base_path);
    p->base = seg->base_offset;
    p->len = (size_t)seg->size;
    p->bytes = malloc(p->len);
    kt_pread(seg->fd, p->bytes, p->len, 0);
    ck_assert_int_eq(ks_log_close(log, NULL), KP_ERR_NONE);
    return log;
}

static void write_file(const pristine *p, const uint8_t *bytes, size_t len)
{
    int fd = open(p->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

/* Reference validity walk over a segment image: the valid prefix end. */
static size_t oracle_end(const uint8_t *b, size_t len, int64_t base, int64_t *next)
{
    size_t pos = 0;
    *next = base;
    while (pos < len) {
        kp_batch_hdr h;
        if (kp_batch_check(b + pos, len - pos, &h) != KP_ERR_NONE || h.base_offset < *next ||
            kp_batch_last_offset(&h) - base > INT32_MAX)
            break;
        *next = kp_batch_last_offset(&h) + 1;
        pos += (size_t)kp_batch_total_size(&h);
    }
    return pos;
}

static void reopen_and_check(const ks_log_config *cfg, const kt_model *m, const pristine *p,
                             size_t want_end, int64_t want_next, int64_t rp)
{
    ks_recover_report rep;
    ks_log *log = kt_open(kt_io(), kt_dir(), cfg, false, rp, &rep);
    ck_assert_int_eq(ks_log_end_offset(log), want_next);
    ck_assert_int_eq(rep.truncated_bytes, (int64_t)(p->len - want_end) + 0);
    int32_t whole = 0;
    while (whole < m->n && m->v[whole].last < want_next)
        whole++;
    kt_check_reads(log, m, whole);
    ks_log_close(log, NULL);
}

START_TEST(test_recover_truncated_at_every_byte)
{
    ks_log_config cfg;
    kt_model m = {0};
    pristine p;
    build(&cfg, &m, &p);
    const kt_batch_rec *lastb = &m.v[m.n - 1];
    size_t start = p.len - (size_t)lastb->len;
    for (size_t cut = start; cut <= p.len; cut++) {
        write_file(&p, p.bytes, cut);
        int64_t want_next = cut == p.len ? lastb->last + 1 : lastb->base;
        size_t want_end = cut == p.len ? p.len : start;
        /* The truncated bytes are those cut away by recovery only. */
        ks_recover_report rep;
        ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, cut % 2 ? 0 : p.base, &rep);
        ck_assert_int_eq(ks_log_end_offset(log), want_next);
        ck_assert_int_eq(rep.truncated_bytes, (int64_t)(cut - want_end));
        ck_assert_int_eq(ks_log_size(log) >= (int64_t)want_end, 1);
        ks_log_close(log, NULL);
    }
    write_file(&p, p.bytes, p.len);
    reopen_and_check(&cfg, &m, &p, p.len, lastb->last + 1, 0);
    free(p.bytes);
    kt_model_free(&m);
}
END_TEST

START_TEST(test_recover_random_bit_flips)
{
    ks_log_config cfg;
    kt_model m = {0};
    pristine p;
    build(&cfg, &m, &p);
    unsigned seed = 99;
    uint8_t *img = malloc(p.len);
    for (int iter = 0; iter < 150; iter++) {
        memcpy(img, p.bytes, p.len);
        int flips = 1 + (int)(rand_r(&seed) % 3);
        for (int f = 0; f < flips; f++)
            img[rand_r(&seed) % p.len] ^= (uint8_t)(1u << (rand_r(&seed) % 8));
        write_file(&p, img, p.len);
        int64_t next;
        size_t end = oracle_end(img, p.len, p.base, &next);
        ks_recover_report rep;
        ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, false, p.base, &rep);
        ck_assert_int_eq(ks_log_end_offset(log), next > p.base ? next : p.base);
        ck_assert_int_eq(rep.truncated_bytes, (int64_t)(p.len - end));
        ck_assert_int_eq(rep.truncated_bytes > 0, rep.reason[0] != '\0');
        ks_log_close(log, NULL);
    }
    free(img);
    write_file(&p, p.bytes, p.len);
    free(p.bytes);
    kt_model_free(&m);
}
END_TEST

/* A clean shutdown marker with a torn tail still recovers (never fails). */
START_TEST(test_recover_clean_but_torn)
{
    ks_log_config cfg;
    kt_model m = {0};
    pristine p;
    build(&cfg, &m, &p);
    write_file(&p, p.bytes, p.len - 3);
    ks_log *log = kt_open(kt_io(), kt_dir(), &cfg, true, -1, NULL);
    ck_assert_int_eq(ks_log_end_offset(log), m.v[m.n - 1].base);
    kt_check_reads(log, &m, m.n - 1);
    ks_log_close(log, NULL);
    free(p.bytes);
    kt_model_free(&m);
}
END_TEST

Suite *recover_suite(void)
{
    Suite *s = suite_create("recover");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, kt_fixture_setup, kt_fixture_teardown);
    tcase_set_timeout(tc, 100);
    tcase_add_test(tc, test_recover_truncated_at_every_byte);
    tcase_add_test(tc, test_recover_random_bit_flips);
    tcase_add_test(tc, test_recover_clean_but_torn);
    suite_add_tcase(s, tc);
    return s;
}
