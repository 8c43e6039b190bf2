/*
 * kp_types: Kafka's primitive wire types, the request arena, and the
 * bounds-checked reader and chunked writer that every codec is built on.
 *
 * Job: all byte-level encoding logic of the protocol lives here; the
 * generated kp_msg_* code only sequences calls into this module.
 *
 * Invariants:
 *   1. A kp_reader never reads outside [p, end). The first failure sets a
 *      sticky err (KP_ERR__UNDERFLOW or KP_ERR__MALFORMED); after that every
 *      read returns zero/empty values, so callers check err once per struct.
 *   2. An array count or byte length is accepted only if it fits in the bytes
 *      that remain (count * min_elem_size <= remaining), so decoding never
 *      allocates more than a small multiple of the input.
 *   3. A kp_writer's total equals the bytes it would send, memory and file
 *      chunks together; in count mode (buf == NULL) it only counts.
 *
 * Ownership:
 *   - kp_arena owns every block it hands out; kp_arena_fini frees them all.
 *   - kp_str / kp_slice are borrowed views: into the frame being decoded (valid
 *     while the request's arena and frame live) or into caller memory.
 *   - kp_writer owns its memory buffer and chunk list until
 *     kp_writer_fini; file chunks reference descriptors it does not own.
 *
 * Threading: no shared state; a reader, writer or arena is used by one
 * thread at a time.
 *
 * Errors: readers set KP_ERR__UNDERFLOW (ran out of bytes) or
 * KP_ERR__MALFORMED (a length below -1, an over-long varint, a count that
 * cannot fit); writers set KP_ERR__NOMEM, or KP_ERR__INVAL for a length the
 * encoding cannot hold (a classic string over INT16_MAX bytes, a tagged field
 * over INT32_MAX, a negative file range), which they refuse, never truncate.
 * The first error sticks; a failed memory writer writes nothing more.
 */
#ifndef KP_TYPES_H
#define KP_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

/* ---- borrowed views ---------------------------------------------------- */

/* A string field: len == -1 means null (p == NULL). Not NUL-terminated. */
typedef struct kp_str {
    const char *p;
    int32_t len;
} kp_str;

/* A bytes field: len == -1 means null (p == NULL). */
typedef struct kp_slice {
    const uint8_t *p;
    int32_t len;
} kp_slice;

typedef struct kp_uuid {
    uint8_t b[16];
} kp_uuid;

/* A byte range of an open file, sent with sendfile(2) or pread. */
typedef struct kp_file_range {
    int fd;
    int64_t off;
    int32_t len;
} kp_file_range;

/* A records field: in memory (file == NULL, len == -1 for null) or, when
 * encoding a response, a range of a segment file (len == file->len). */
typedef struct kp_records {
    const uint8_t *p;
    int32_t len;
    const kp_file_range *file;
} kp_records;

#define KP_STR_NULL  ((kp_str){NULL, -1})
#define KP_STR_LIT(s) ((kp_str){(s), (int32_t)(sizeof(s) - 1)})

/* A view of a C string; KP_STR_NULL for NULL, and for a string longer than
 * INT32_MAX bytes, which no Kafka field can carry. */
kp_str kp_str_from(const char *cstr);
bool kp_str_eq(kp_str a, kp_str b);
bool kp_str_eq_c(kp_str a, const char *cstr);
/* A malloc'ed NUL-terminated copy of s; NULL for a null string (or no
 * memory). The caller frees it. */
char *kp_str_cdup(kp_str s);
/* Whether c (NULL for null) and s hold the same string; null equals null. */
bool kp_cstr_is(const char *c, kp_str s);
bool kp_uuid_is_zero(const kp_uuid *u);

/* ---- arena -------------------------------------------------------------- */

typedef struct kp_arena_chunk kp_arena_chunk;

typedef struct kp_arena {
    kp_arena_chunk *head;
    size_t used;  /* bytes used in head */
    size_t total; /* bytes handed out, for accounting */
} kp_arena;

void kp_arena_init(kp_arena *a);
void kp_arena_fini(kp_arena *a);
/* Frees all but keeps nothing: equivalent to fini + init. */
void kp_arena_reset(kp_arena *a);
/* Zeroed, 16-byte aligned memory; NULL on out of memory or overflow. */
void *kp_arena_alloc(kp_arena *a, size_t size);
void *kp_arena_calloc(kp_arena *a, size_t n, size_t size);
/* Copies into the arena (NUL-terminated too); NULL on out of memory. */
char *kp_arena_strdup(kp_arena *a, const char *p, size_t len);
/* printf into the arena; the result is NUL-terminated. */
char *kp_arena_printf(kp_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- reader ------------------------------------------------------------- */

typedef struct kp_reader {
    const uint8_t *p;
    const uint8_t *end;
    kp_err err;
} kp_reader;

static inline kp_reader kp_reader_make(const void *p, size_t len)
{
    /* No arithmetic on a null pointer (an empty view may have p == NULL). */
    const uint8_t *b = (const uint8_t *)p;
    kp_reader r = {b, b != NULL ? b + len : NULL, KP_ERR_NONE};
    return r;
}

static inline size_t kp_reader_left(const kp_reader *r)
{
    return (size_t)(r->end - r->p);
}

void kp_reader_fail(kp_reader *r, kp_err err);
int8_t kp_read_i8(kp_reader *r);
int16_t kp_read_i16(kp_reader *r);
int32_t kp_read_i32(kp_reader *r);
int64_t kp_read_i64(kp_reader *r);
uint16_t kp_read_u16(kp_reader *r);
uint32_t kp_read_u32(kp_reader *r);
double kp_read_f64(kp_reader *r);
bool kp_read_bool(kp_reader *r);
kp_uuid kp_read_uuid(kp_reader *r);
/* Unsigned LEB128 of at most 5 bytes (32 bits). */
uint32_t kp_read_uvarint(kp_reader *r);
/* Zig-zag varints as in record batches. */
int32_t kp_read_varint(kp_reader *r);
int64_t kp_read_varlong(kp_reader *r);
/* compact selects the flexible (uvarint length + 1) encoding. */
kp_str kp_read_str(kp_reader *r, bool compact);
kp_slice kp_read_bytes(kp_reader *r, bool compact);
kp_records kp_read_records(kp_reader *r, bool compact);
/* Kafka 4.4's decoder limits: a message whose array claims more elements,
 * or whose tagged-field section claims more fields, is malformed. */
#define KP_MAX_ARRAY_LEN 1000000
#define KP_MAX_TAGGED_FIELDS 10000
/* Reads an array count: -1 for null. Fails unless n * min_elem <= left and
 * n <= KP_MAX_ARRAY_LEN. */
int32_t kp_read_array_len(kp_reader *r, bool compact, size_t min_elem);
/* Borrows n raw bytes. */
const uint8_t *kp_read_raw(kp_reader *r, size_t n);
/* Reads one tagged-field header: its tag, and a sub-reader over its bytes,
 * which the caller decodes or ignores; r moves past the field. */
uint32_t kp_read_tag(kp_reader *r, kp_reader *sub);
/* Reads a tagged-field section's count; fails if it exceeds the bytes left
 * or KP_MAX_TAGGED_FIELDS. */
uint32_t kp_read_tag_count(kp_reader *r);
/* Reads and ignores a whole tagged-field section. */
void kp_skip_tags(kp_reader *r);

/* ---- writer ------------------------------------------------------------- */

/* A file chunk, sent after the first mem_pos bytes of memory not yet sent. */
typedef struct kp_wchunk {
    size_t mem_pos;
    kp_file_range file;
} kp_wchunk;

typedef struct kp_writer {
    uint8_t *buf;  /* NULL in count mode */
    size_t len;    /* memory bytes written */
    size_t cap;
    size_t total;  /* memory + file bytes */
    kp_wchunk *chunks;
    int32_t nchunks;
    int32_t chunks_cap;
    bool counting;
    kp_err err;
} kp_writer;

void kp_writer_init(kp_writer *w, size_t initial_cap);
void kp_writer_init_count(kp_writer *w);
void kp_writer_fini(kp_writer *w);
/* Hands the memory buffer to the caller (who free()s it); chunks stay. */
uint8_t *kp_writer_steal(kp_writer *w);

/* Sets w's sticky error (the first one wins). */
void kp_writer_fail(kp_writer *w, kp_err err);
void kp_write_raw(kp_writer *w, const void *p, size_t n);
void kp_write_i8(kp_writer *w, int8_t v);
void kp_write_i16(kp_writer *w, int16_t v);
void kp_write_i32(kp_writer *w, int32_t v);
void kp_write_i64(kp_writer *w, int64_t v);
void kp_write_u16(kp_writer *w, uint16_t v);
void kp_write_u32(kp_writer *w, uint32_t v);
void kp_write_f64(kp_writer *w, double v);
void kp_write_bool(kp_writer *w, bool v);
void kp_write_uuid(kp_writer *w, const kp_uuid *v);
void kp_write_uvarint(kp_writer *w, uint32_t v);
void kp_write_varint(kp_writer *w, int32_t v);
void kp_write_varlong(kp_writer *w, int64_t v);
void kp_write_str(kp_writer *w, bool compact, kp_str s);
void kp_write_bytes(kp_writer *w, bool compact, kp_slice s);
void kp_write_records(kp_writer *w, bool compact, const kp_records *rec);
void kp_write_array_len(kp_writer *w, bool compact, int32_t n);
/* One tagged-field header: the tag, then the field's size in bytes; a size
 * over INT32_MAX (Kafka reads it into an int) fails w with KP_ERR__INVAL. */
void kp_write_tag_header(kp_writer *w, uint32_t tag, size_t size);
/* Overwrites 4 bytes at pos (for frame sizes written after the body). */
void kp_writer_patch_i32(kp_writer *w, size_t pos, int32_t v);

/* Sizes of encodings, for callers that lay out frames by hand. */
size_t kp_uvarint_size(uint32_t v);
size_t kp_varint_size(int32_t v);
size_t kp_varlong_size(int64_t v);

#endif
