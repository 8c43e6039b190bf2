#include "kp_types.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- views -------------------------------------------------------------- */

kp_str kp_str_from(const char *cstr)
{
    if (cstr == NULL)
        return KP_STR_NULL;
    size_t n = strlen(cstr);
    if (n > INT32_MAX) /* no Kafka field can carry it; see kp_types.h */
        return KP_STR_NULL;
    return (kp_str){cstr, (int32_t)n};
}

bool kp_str_eq(kp_str a, kp_str b)
{
    if (a.len != b.len)
        return false;
    return a.len <= 0 || memcmp(a.p, b.p, (size_t)a.len) == 0;
}

bool kp_str_eq_c(kp_str a, const char *cstr)
{
    return kp_str_eq(a, kp_str_from(cstr));
}

char *kp_str_cdup(kp_str s)
{
    if (s.len < 0)
        return NULL;
    char *p = malloc((size_t)s.len + 1);
    if (p != NULL) {
        if (s.len > 0)
            memcpy(p, s.p, (size_t)s.len);
        p[s.len] = '\0';
    }
    return p;
}

bool kp_cstr_is(const char *c, kp_str s)
{
    if (c == NULL || s.len < 0)
        return c == NULL && s.len < 0;
    return strlen(c) == (size_t)s.len && (s.len == 0 || memcmp(c, s.p, (size_t)s.len) == 0);
}

bool kp_uuid_is_zero(const kp_uuid *u)
{
    static const kp_uuid zero;
    return memcmp(u->b, zero.b, sizeof(zero.b)) == 0;
}

/* ---- arena -------------------------------------------------------------- */

#define KP_ARENA_CHUNK 8192u
#define KP_ARENA_ALIGN 16u

struct kp_arena_chunk {
    kp_arena_chunk *next;
    size_t size; /* usable bytes in data */
    _Alignas(16) uint8_t data[];
};

void kp_arena_init(kp_arena *a)
{
    a->head = NULL;
    a->used = 0;
    a->total = 0;
}

void kp_arena_fini(kp_arena *a)
{
    kp_arena_chunk *c = a->head;
    while (c != NULL) {
        kp_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    kp_arena_init(a);
}

void kp_arena_reset(kp_arena *a)
{
    kp_arena_fini(a);
}

static kp_arena_chunk *arena_chunk_new(size_t size)
{
    kp_arena_chunk *c = malloc(sizeof(*c) + size);
    if (c != NULL)
        c->size = size;
    return c;
}

void *kp_arena_alloc(kp_arena *a, size_t size)
{
    if (size > SIZE_MAX / 2)
        return NULL;
    size_t rounded = (size + KP_ARENA_ALIGN - 1) & ~(size_t)(KP_ARENA_ALIGN - 1);
    if (rounded == 0)
        rounded = KP_ARENA_ALIGN;
    void *p;
    if (rounded > KP_ARENA_CHUNK / 4) {
        /* Large blocks get a chunk of their own, linked behind the head. */
        kp_arena_chunk *c = arena_chunk_new(rounded);
        if (c == NULL)
            return NULL;
        if (a->head == NULL) {
            c->next = NULL;
            a->head = c;
            a->used = rounded;
        } else {
            c->next = a->head->next;
            a->head->next = c;
        }
        p = c->data;
    } else {
        if (a->head == NULL || a->used + rounded > a->head->size) {
            kp_arena_chunk *c = arena_chunk_new(KP_ARENA_CHUNK);
            if (c == NULL)
                return NULL;
            c->next = a->head;
            a->head = c;
            a->used = 0;
        }
        p = a->head->data + a->used;
        a->used += rounded;
    }
    a->total += rounded;
    memset(p, 0, size);
    return p;
}

void *kp_arena_calloc(kp_arena *a, size_t n, size_t size)
{
    if (size != 0 && n > SIZE_MAX / 2 / size)
        return NULL;
    return kp_arena_alloc(a, n * size);
}

char *kp_arena_strdup(kp_arena *a, const char *p, size_t len)
{
    char *s = kp_arena_alloc(a, len + 1);
    if (s != NULL && len > 0)
        memcpy(s, p, len);
    return s;
}

char *kp_arena_printf(kp_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return NULL;
    char *s = kp_arena_alloc(a, (size_t)n + 1);
    if (s == NULL)
        return NULL;
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* ---- reader ------------------------------------------------------------- */

void kp_reader_fail(kp_reader *r, kp_err err)
{
    if (r->err == KP_ERR_NONE)
        r->err = err;
    r->p = r->end;
}

const uint8_t *kp_read_raw(kp_reader *r, size_t n)
{
    if (r->err != KP_ERR_NONE || kp_reader_left(r) < n) {
        kp_reader_fail(r, KP_ERR__UNDERFLOW);
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

static uint64_t read_be(kp_reader *r, size_t n)
{
    const uint8_t *p = kp_read_raw(r, n);
    uint64_t v = 0;
    if (p == NULL)
        return 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

int8_t kp_read_i8(kp_reader *r)
{
    return (int8_t)read_be(r, 1);
}

int16_t kp_read_i16(kp_reader *r)
{
    return (int16_t)read_be(r, 2);
}

int32_t kp_read_i32(kp_reader *r)
{
    return (int32_t)read_be(r, 4);
}

int64_t kp_read_i64(kp_reader *r)
{
    return (int64_t)read_be(r, 8);
}

uint16_t kp_read_u16(kp_reader *r)
{
    return (uint16_t)read_be(r, 2);
}

uint32_t kp_read_u32(kp_reader *r)
{
    return (uint32_t)read_be(r, 4);
}

double kp_read_f64(kp_reader *r)
{
    uint64_t bits = read_be(r, 8);
    double d;
    memcpy(&d, &bits, sizeof(d));
    return d;
}

bool kp_read_bool(kp_reader *r)
{
    return read_be(r, 1) != 0;
}

kp_uuid kp_read_uuid(kp_reader *r)
{
    kp_uuid u = {{0}};
    const uint8_t *p = kp_read_raw(r, sizeof(u.b));
    if (p != NULL)
        memcpy(u.b, p, sizeof(u.b));
    return u;
}

static uint64_t read_uleb(kp_reader *r, unsigned max_bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < max_bytes; i++) {
        const uint8_t *p = kp_read_raw(r, 1);
        if (p == NULL)
            return 0;
        v |= (uint64_t)(*p & 0x7f) << (7 * i);
        if ((*p & 0x80) == 0)
            return v;
    }
    kp_reader_fail(r, KP_ERR__MALFORMED);
    return 0;
}

uint32_t kp_read_uvarint(kp_reader *r)
{
    uint64_t v = read_uleb(r, 5);
    if (v > UINT32_MAX) {
        kp_reader_fail(r, KP_ERR__MALFORMED);
        return 0;
    }
    return (uint32_t)v;
}

int32_t kp_read_varint(kp_reader *r)
{
    uint32_t v = kp_read_uvarint(r);
    return (int32_t)((v >> 1) ^ (~(v & 1) + 1));
}

int64_t kp_read_varlong(kp_reader *r)
{
    uint64_t v = read_uleb(r, 10);
    return (int64_t)((v >> 1) ^ (~(v & 1) + 1));
}

/* Reads a length: classic int16/int32 with -1 null, or compact uvarint - 1.
 * Returns -1 for null, -2 after a failure. */
static int64_t read_len(kp_reader *r, bool compact, bool wide)
{
    int64_t n;
    if (compact)
        n = (int64_t)kp_read_uvarint(r) - 1;
    else
        n = wide ? kp_read_i32(r) : kp_read_i16(r);
    if (r->err != KP_ERR_NONE)
        return -2;
    if (n < -1) {
        kp_reader_fail(r, KP_ERR__MALFORMED);
        return -2;
    }
    return n;
}

kp_str kp_read_str(kp_reader *r, bool compact)
{
    int64_t n = read_len(r, compact, false);
    if (n < 0 || (compact && n > INT16_MAX)) {
        if (n > INT16_MAX)
            kp_reader_fail(r, KP_ERR__MALFORMED);
        return KP_STR_NULL;
    }
    const uint8_t *p = kp_read_raw(r, (size_t)n);
    if (p == NULL)
        return KP_STR_NULL;
    return (kp_str){(const char *)p, (int32_t)n};
}

kp_slice kp_read_bytes(kp_reader *r, bool compact)
{
    int64_t n = read_len(r, compact, true);
    if (n < 0 || n > INT32_MAX)
        return (kp_slice){NULL, -1};
    const uint8_t *p = kp_read_raw(r, (size_t)n);
    if (p == NULL)
        return (kp_slice){NULL, -1};
    return (kp_slice){p, (int32_t)n};
}

kp_records kp_read_records(kp_reader *r, bool compact)
{
    kp_slice s = kp_read_bytes(r, compact);
    return (kp_records){s.p, s.len, NULL};
}

int32_t kp_read_array_len(kp_reader *r, bool compact, size_t min_elem)
{
    int64_t n = read_len(r, compact, true);
    if (n < 0)
        return -1;
    if (min_elem == 0)
        min_elem = 1;
    if ((uint64_t)n > kp_reader_left(r) / min_elem || n > KP_MAX_ARRAY_LEN) {
        kp_reader_fail(r, KP_ERR__MALFORMED);
        return -1;
    }
    return (int32_t)n;
}

uint32_t kp_read_tag(kp_reader *r, kp_reader *sub)
{
    uint32_t tag = kp_read_uvarint(r);
    uint32_t size = kp_read_uvarint(r);
    const uint8_t *p = kp_read_raw(r, size);
    *sub = kp_reader_make(p, p == NULL ? 0 : size);
    if (p == NULL)
        sub->err = r->err;
    return tag;
}

uint32_t kp_read_tag_count(kp_reader *r)
{
    uint32_t n = kp_read_uvarint(r);
    if (n > kp_reader_left(r) || n > KP_MAX_TAGGED_FIELDS) {
        kp_reader_fail(r, KP_ERR__MALFORMED);
        return 0;
    }
    return n;
}

void kp_skip_tags(kp_reader *r)
{
    uint32_t n = kp_read_tag_count(r);
    for (uint32_t i = 0; i < n && r->err == KP_ERR_NONE; i++) {
        kp_reader sub;
        (void)kp_read_tag(r, &sub);
    }
}

/* ---- writer ------------------------------------------------------------- */

void kp_writer_init(kp_writer *w, size_t initial_cap)
{
    memset(w, 0, sizeof(*w));
    w->cap = initial_cap > 64 ? initial_cap : 64;
    w->buf = malloc(w->cap);
    if (w->buf == NULL) {
        w->cap = 0;
        w->err = KP_ERR__NOMEM;
    }
}

void kp_writer_init_count(kp_writer *w)
{
    memset(w, 0, sizeof(*w));
    w->counting = true;
}

void kp_writer_fini(kp_writer *w)
{
    free(w->buf);
    free(w->chunks);
    memset(w, 0, sizeof(*w));
}

uint8_t *kp_writer_steal(kp_writer *w)
{
    uint8_t *b = w->buf;
    w->buf = NULL;
    w->cap = 0;
    return b;
}

void kp_writer_fail(kp_writer *w, kp_err err)
{
    if (w->err == KP_ERR_NONE)
        w->err = err;
}

static bool writer_reserve(kp_writer *w, size_t n)
{
    if (w->err != KP_ERR_NONE)
        return false;
    if (w->len + n <= w->cap)
        return true;
    size_t cap = w->cap ? w->cap : 64;
    while (cap < w->len + n) {
        if (cap > SIZE_MAX / 2) {
            w->err = KP_ERR__NOMEM;
            return false;
        }
        cap *= 2;
    }
    uint8_t *b = realloc(w->buf, cap);
    if (b == NULL) {
        w->err = KP_ERR__NOMEM;
        return false;
    }
    w->buf = b;
    w->cap = cap;
    return true;
}

void kp_write_raw(kp_writer *w, const void *p, size_t n)
{
    if (w->counting) {
        w->len += n;
        w->total += n;
        return;
    }
    if (!writer_reserve(w, n))
        return;
    if (n > 0)
        memcpy(w->buf + w->len, p, n);
    w->len += n;
    w->total += n;
}

static void write_be(kp_writer *w, uint64_t v, size_t n)
{
    uint8_t b[8];
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
    kp_write_raw(w, b, n);
}

void kp_write_i8(kp_writer *w, int8_t v)
{
    write_be(w, (uint8_t)v, 1);
}

void kp_write_i16(kp_writer *w, int16_t v)
{
    write_be(w, (uint16_t)v, 2);
}

void kp_write_i32(kp_writer *w, int32_t v)
{
    write_be(w, (uint32_t)v, 4);
}

void kp_write_i64(kp_writer *w, int64_t v)
{
    write_be(w, (uint64_t)v, 8);
}

void kp_write_u16(kp_writer *w, uint16_t v)
{
    write_be(w, v, 2);
}

void kp_write_u32(kp_writer *w, uint32_t v)
{
    write_be(w, v, 4);
}

void kp_write_f64(kp_writer *w, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    write_be(w, bits, 8);
}

void kp_write_bool(kp_writer *w, bool v)
{
    write_be(w, v ? 1 : 0, 1);
}

void kp_write_uuid(kp_writer *w, const kp_uuid *v)
{
    kp_write_raw(w, v->b, sizeof(v->b));
}

static void write_uleb(kp_writer *w, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    kp_write_raw(w, b, n);
}

void kp_write_uvarint(kp_writer *w, uint32_t v)
{
    write_uleb(w, v);
}

void kp_write_varint(kp_writer *w, int32_t v)
{
    write_uleb(w, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

void kp_write_varlong(kp_writer *w, int64_t v)
{
    write_uleb(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* Writes a length n >= -1 (-1: null). The int16 form refuses what it cannot
 * hold instead of truncating it; the uvarint form adds in unsigned (n + 1
 * never overflows, and -1 becomes 0). */
static void write_len(kp_writer *w, bool compact, bool wide, int32_t n)
{
    if (compact)
        kp_write_uvarint(w, (uint32_t)n + 1u);
    else if (wide)
        kp_write_i32(w, n);
    else if (n > INT16_MAX)
        kp_writer_fail(w, KP_ERR__INVAL);
    else
        kp_write_i16(w, (int16_t)n);
}

void kp_write_str(kp_writer *w, bool compact, kp_str s)
{
    int32_t n = s.len < 0 ? -1 : s.len;
    write_len(w, compact, false, n);
    if (n > 0)
        kp_write_raw(w, s.p, (size_t)n);
}

void kp_write_bytes(kp_writer *w, bool compact, kp_slice s)
{
    int32_t n = s.len < 0 ? -1 : s.len;
    write_len(w, compact, true, n);
    if (n > 0)
        kp_write_raw(w, s.p, (size_t)n);
}

static void writer_add_file(kp_writer *w, const kp_file_range *f)
{
    w->total += (size_t)f->len; /* f->len >= 0: kp_write_records checked it */
    if (w->counting || w->err != KP_ERR_NONE)
        return;
    if (w->nchunks == w->chunks_cap) {
        if (w->chunks_cap > INT32_MAX / 2) {
            w->err = KP_ERR__NOMEM;
            return;
        }
        int32_t cap = w->chunks_cap ? w->chunks_cap * 2 : 8;
        kp_wchunk *c = realloc(w->chunks, (size_t)cap * sizeof(*c));
        if (c == NULL) {
            w->err = KP_ERR__NOMEM;
            return;
        }
        w->chunks = c;
        w->chunks_cap = cap;
    }
    w->chunks[w->nchunks++] = (kp_wchunk){w->len, *f};
}

void kp_write_records(kp_writer *w, bool compact, const kp_records *rec)
{
    if (rec->file == NULL) {
        kp_write_bytes(w, compact, (kp_slice){rec->p, rec->len});
        return;
    }
    if (rec->file->len < 0) {
        kp_writer_fail(w, KP_ERR__INVAL);
        return;
    }
    write_len(w, compact, true, rec->file->len);
    writer_add_file(w, rec->file);
}

void kp_write_tag_header(kp_writer *w, uint32_t tag, size_t size)
{
    if (size > INT32_MAX) {
        kp_writer_fail(w, KP_ERR__INVAL);
        return;
    }
    kp_write_uvarint(w, tag);
    kp_write_uvarint(w, (uint32_t)size);
}

void kp_write_array_len(kp_writer *w, bool compact, int32_t n)
{
    write_len(w, compact, true, n < 0 ? -1 : n);
}

void kp_writer_patch_i32(kp_writer *w, size_t pos, int32_t v)
{
    if (w->counting || w->err != KP_ERR_NONE || pos + 4 > w->len)
        return;
    uint32_t u = (uint32_t)v;
    for (size_t i = 0; i < 4; i++)
        w->buf[pos + i] = (uint8_t)(u >> (24 - 8 * i));
}

size_t kp_uvarint_size(uint32_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

size_t kp_varint_size(int32_t v)
{
    return kp_uvarint_size(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

size_t kp_varlong_size(int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 1;
    while (u >= 0x80) {
        u >>= 7;
        n++;
    }
    return n;
}
