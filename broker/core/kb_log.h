/*
 * kb_log: the broker's one way to write a log line, plus assertions.
 *
 * Job: format one `key=value` line per entry and write it to stderr with a
 * single write(2):
 *
 *     2026-11-29T10:00:00.123Z INFO config msg="unknown key" key=foo.bar
 *
 * (UTC timestamp with milliseconds, level, subsystem, then the caller's text).
 * By convention the caller's text starts with `msg="..."` and continues with
 * `key=value` pairs (a connection's id as `conn=N`); bytes that came from a
 * client go through kb_log_escape() first. Also: a keyed rate limiter for
 * per-peer warnings, and KB_ASSERT / KB_DCHECK / KB_ALWAYS / KB_NEVER.
 *
 * Invariants:
 *   1. One call writes exactly one line, ending in '\n', of at most
 *      KB_LOG_LINE_MAX bytes (longer text is cut and ends in "...").
 *   2. A line is written only if its level is <= the global level; DEBUG and
 *      TRACE lines also need their subsystem bit in the global mask.
 *   3. KB_LL_TRACE lines compile to nothing unless the build defines
 *      KB_TRACE=1 (meson option `trace`); arguments are still type-checked.
 *   4. kb_log_escape() output is printable ASCII without '"' or '\', fits in
 *      the caller's buffer, and is always NUL-terminated.
 *   5. A kb_log_ratelimit lets through at most `burst` lines per slot per
 *      `interval_ms`, so at most KB_LOG_RL_SLOTS * burst lines per interval in
 *      all, whatever the number of distinct keys.
 *
 * Ownership: nothing is allocated. kb_log_level_name()/kb_log_subsys_name()
 * return static strings. kb_log_escape() writes into the caller's buffer.
 *
 * Threading: kb_log_write() may be called from any thread (one write(2) per
 * line, no shared buffer). The level and mask are the one mutable global
 * besides the frozen config: atomics, set by main at startup from
 * `runnel.log.level` / `runnel.log.subsystems`. A kb_log_ratelimit belongs to
 * one thread (its owner's).
 *
 * Errors: logging never fails visibly: a failed write is dropped.
 * KB_ASSERT failing prints file:line and a backtrace, then abort()s.
 * Never KB_ASSERT on peer input.
 */
#ifndef KB_LOG_H
#define KB_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Levels, most severe first; the order is the filter order. */
typedef enum kb_log_level {
    KB_LL_ERROR = 0,
    KB_LL_WARN = 1,
    KB_LL_INFO = 2,
    KB_LL_DEBUG = 3,
    KB_LL_TRACE = 4,
} kb_log_level;

/* Subsystem bits (nginx-style debug masks). */
enum kb_log_subsys {
    KB_SUB_NET = 1u << 0,
    KB_SUB_PROTO = 1u << 1,
    KB_SUB_STORAGE = 1u << 2,
    KB_SUB_GROUP = 1u << 3,
    KB_SUB_CONFIG = 1u << 4,
    KB_SUB_MAIN = 1u << 5,
    KB_SUB_ALL = (1u << 6) - 1,
};

#define KB_LOG_LINE_MAX 2048 /* bytes per line, '\n' included */

#if defined(KB_TRACE) && KB_TRACE
#define KB_LOG_TRACE_COMPILED 1
#else
#define KB_LOG_TRACE_COMPILED 0
#endif

/*
 * KB_LOG(KB_LL_WARN, KB_SUB_NET, "msg=\"bad frame\" conn=%llu size=%d", id, n);
 * Pass constants for level and subsys (they may be evaluated twice); the
 * arguments are evaluated only if the line is written.
 */
#define KB_LOG(level, subsys, ...)                                                      \
    do {                                                                                \
        if (((level) != KB_LL_TRACE || KB_LOG_TRACE_COMPILED) &&                        \
            kb_log_enabled((level), (subsys)))                                          \
            kb_log_write((level), (subsys), __VA_ARGS__);                               \
    } while (0)

/* True if a line at this level and subsystem would be written now. */
bool kb_log_enabled(kb_log_level level, unsigned subsys);

/* Formats and writes one line to stderr (see KB_LOG; prefer the macro). */
void kb_log_write(kb_log_level level, unsigned subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Formats one line into buf (cap >= 64) without writing it: the timestamp of
 * `now`, level, subsystem, the text, '\n'. Returns the length (< cap); the
 * line is NUL-terminated. Used by kb_log_write and by tests.
 */
size_t kb_log_format(char *buf, size_t cap, const struct timespec *now, kb_log_level level,
                     unsigned subsys, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

/* The global filter (defaults: KB_LL_INFO, KB_SUB_ALL). */
void kb_log_set_level(kb_log_level level);
kb_log_level kb_log_get_level(void);
void kb_log_set_subsystems(unsigned mask);
unsigned kb_log_get_subsystems(void);

/* "ERROR", "WARN", "INFO", "DEBUG", "TRACE"; "?" for anything else. */
const char *kb_log_level_name(kb_log_level level);
/* "net", "proto", ... for a single bit; "-" for anything else. */
const char *kb_log_subsys_name(unsigned subsys);

/*
 * Escapes len bytes of src into dst (capacity cap >= 4): printable ASCII is
 * copied, '"' and '\' and every other byte become \xNN. If the escaped text
 * does not fit, it is cut at a whole escape and ends in "...". Returns dst.
 */
char *kb_log_escape(char *dst, size_t cap, const void *src, size_t len);

/* A buffer size that holds up to 64 client bytes escaped, plus "...". */
#define KB_LOG_ESC_SHORT (64 * 4 + 4)

/*
 * Keyed rate limiter: a key (a peer address hash, a call site, ...) picks one
 * of KB_LOG_RL_SLOTS slots; each slot lets `burst` lines through per
 * interval_ms. Keys that hash to the same slot share its budget, so the
 * total stays bounded however many keys a hostile peer set invents.
 */
#define KB_LOG_RL_SLOTS 64

typedef struct kb_log_rl_slot {
    int64_t rs_window_start_ms;
    uint32_t rs_count;      /* lines let through in this window */
    uint32_t rs_suppressed; /* lines refused in this window */
} kb_log_rl_slot;

typedef struct kb_log_ratelimit {
    int64_t rl_interval_ms;
    uint32_t rl_burst;
    kb_log_rl_slot rl_slot[KB_LOG_RL_SLOTS];
} kb_log_ratelimit;

void kb_log_ratelimit_init(kb_log_ratelimit *rl, uint32_t burst, int64_t interval_ms);

/*
 * True if a line for key may be written at now_ms (a monotonic clock, e.g.
 * kb_log_now_ms(), or a fake one in tests). When a new window opens and lines
 * were refused in the last one, *suppressed (if non-NULL) gets their number,
 * to be logged as `suppressed=N`; otherwise it gets 0.
 */
bool kb_log_ratelimit_allow(kb_log_ratelimit *rl, uint64_t key, int64_t now_ms,
                            uint32_t *suppressed);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t kb_log_now_ms(void);

/* Prints "assertion failed" with file:line, a backtrace, and aborts. */
_Noreturn void kb_log_assert_fail(const char *expr, const char *file, int line,
                                  const char *func);

/* Always on: our own invariants only, never peer input; keep cond cheap. */
#define KB_ASSERT(cond)                                                                 \
    do {                                                                                \
        if (__builtin_expect(!(cond), 0))                                               \
            kb_log_assert_fail(#cond, __FILE__, __LINE__, __func__);                    \
    } while (0)

#ifndef NDEBUG
/* Debug builds only; may be expensive; cond is not evaluated in release. */
#define KB_DCHECK(cond) KB_ASSERT(cond)
/* KB_ALWAYS(x)/KB_NEVER(x): abort in debug; in release return x so the caller
 * can take the safe path: `if (KB_NEVER(n < 0)) return KP_ERR__INVAL;` */
#define KB_ALWAYS(x) ((x) ? 1 : (kb_log_assert_fail(#x, __FILE__, __LINE__, __func__), 0))
#define KB_NEVER(x)  ((x) ? (kb_log_assert_fail("!(" #x ")", __FILE__, __LINE__, __func__), 1) : 0)
#else
#define KB_DCHECK(cond) ((void)sizeof(!(cond)))
#define KB_ALWAYS(x)    (!!(x))
#define KB_NEVER(x)     (!!(x))
#endif

#endif
