#include "kb_log.h"

#include <errno.h>
#include <execinfo.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kb_map.h"

/* The one mutable global besides the frozen config (see kb_log.h, Threading). */
static _Atomic int log_level = KB_LL_INFO;
static _Atomic unsigned log_mask = KB_SUB_ALL;

static const char *const level_names[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};

static const struct {
    unsigned bit;
    const char *name;
} subsys_names[] = {
    {KB_SUB_NET, "net"},       {KB_SUB_PROTO, "proto"},   {KB_SUB_STORAGE, "storage"},
    {KB_SUB_GROUP, "group"},   {KB_SUB_CONFIG, "config"}, {KB_SUB_MAIN, "main"},
};

void kb_log_set_level(kb_log_level level)
{
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

kb_log_level kb_log_get_level(void)
{
    return (kb_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

void kb_log_set_subsystems(unsigned mask)
{
    atomic_store_explicit(&log_mask, mask & KB_SUB_ALL, memory_order_relaxed);
}

unsigned kb_log_get_subsystems(void)
{
    return atomic_load_explicit(&log_mask, memory_order_relaxed);
}

bool kb_log_enabled(kb_log_level level, unsigned subsys)
{
    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
        return false;
    if (level < KB_LL_DEBUG)
        return true;
    return (subsys & atomic_load_explicit(&log_mask, memory_order_relaxed)) != 0;
}

const char *kb_log_level_name(kb_log_level level)
{
    if ((unsigned)level >= sizeof level_names / sizeof level_names[0])
        return "?";
    return level_names[level];
}

const char *kb_log_subsys_name(unsigned subsys)
{
    for (size_t i = 0; i < sizeof subsys_names / sizeof subsys_names[0]; i++) {
        if (subsys_names[i].bit == subsys)
            return subsys_names[i].name;
    }
    return "-";
}

/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ LEVEL subsys " into buf; returns its length. */
static size_t format_prefix(char *buf, size_t cap, const struct timespec *now,
                            kb_log_level level, unsigned subsys)
{
    struct tm tm;
    char stamp[32];
    time_t sec = now->tv_sec;

    if (gmtime_r(&sec, &tm) == NULL || strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        snprintf(stamp, sizeof stamp, "%lld", (long long)sec);
    int n = snprintf(buf, cap, "%s.%03ldZ %s %s ", stamp, (long)(now->tv_nsec / 1000000),
                     kb_log_level_name(level), kb_log_subsys_name(subsys));
    if (n < 0)
        return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}

size_t kb_log_format(char *buf, size_t cap, const struct timespec *now, kb_log_level level,
                     unsigned subsys, const char *fmt, va_list ap)
{
    KB_ASSERT(cap >= 64);
    size_t len = format_prefix(buf, cap - 1, now, level, subsys);
    size_t room = cap - 1 - len; /* one byte kept for '\n' */
    int n = vsnprintf(buf + len, room, fmt, ap);
    size_t body = n < 0 ? 0 : (size_t)n;

    if (body >= room) { /* cut: end in "..." */
        body = room - 1;
        memcpy(buf + len + body - 3, "...", 3);
    }
    for (size_t i = len; i < len + body; i++) { /* one entry, one line */
        if (buf[i] == '\n' || buf[i] == '\r')
            buf[i] = ' ';
    }
    len += body;
    buf[len++] = '\n';
    buf[len] = '\0';
    return len;
}

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to report it: drop the line */
        p += w;
        len -= (size_t)w;
    }
}

void kb_log_write(kb_log_level level, unsigned subsys, const char *fmt, ...)
{
    char line[KB_LOG_LINE_MAX];
    struct timespec now;
    va_list ap;

    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        now = (struct timespec){0, 0};
    va_start(ap, fmt);
    size_t len = kb_log_format(line, sizeof line, &now, level, subsys, fmt, ap);
    va_end(ap);
    write_all(STDERR_FILENO, line, len);
}

static bool byte_is_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}

char *kb_log_escape(char *dst, size_t cap, const void *src, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = src;
    size_t total = 0, pos = 0;

    KB_ASSERT(cap >= 4);
    for (size_t i = 0; i < len; i++)
        total += byte_is_plain(s[i]) ? 1 : 4;
    size_t limit = total < cap ? cap - 1 : cap - 4; /* room for "..." if cut */
    for (size_t i = 0; i < len; i++) {
        size_t need = byte_is_plain(s[i]) ? 1 : 4;
        if (pos + need > limit)
            break;
        if (need == 1) {
            dst[pos++] = (char)s[i];
        } else {
            dst[pos++] = '\\';
            dst[pos++] = 'x';
            dst[pos++] = hex[s[i] >> 4];
            dst[pos++] = hex[s[i] & 15];
        }
    }
    if (total >= cap) {
        memcpy(dst + pos, "...", 3);
        pos += 3;
    }
    dst[pos] = '\0';
    return dst;
}

void kb_log_ratelimit_init(kb_log_ratelimit *rl, uint32_t burst, int64_t interval_ms)
{
    memset(rl, 0, sizeof *rl);
    rl->rl_burst = burst;
    rl->rl_interval_ms = interval_ms > 0 ? interval_ms : 1;
}

bool kb_log_ratelimit_allow(kb_log_ratelimit *rl, uint64_t key, int64_t now_ms,
                            uint32_t *suppressed)
{
    kb_log_rl_slot *s = &rl->rl_slot[kb_map_mix(key) % KB_LOG_RL_SLOTS];
    uint32_t refused = 0;

    if (s->rs_count == 0 || now_ms - s->rs_window_start_ms >= rl->rl_interval_ms) {
        refused = s->rs_suppressed;
        s->rs_window_start_ms = now_ms;
        s->rs_count = 0;
        s->rs_suppressed = 0;
    }
    if (suppressed != NULL)
        *suppressed = 0;
    if (s->rs_count >= rl->rl_burst) {
        s->rs_suppressed++;
        return false;
    }
    s->rs_count++;
    if (suppressed != NULL)
        *suppressed = refused;
    return true;
}

int64_t kb_log_now_ms(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void kb_log_assert_fail(const char *expr, const char *file, int line, const char *func)
{
    char esc[512];
    void *frames[64];

    kb_log_escape(esc, sizeof esc, expr, strlen(expr));
    kb_log_write(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"assertion failed\" expr=\"%s\" at=%s:%d func=%s",
                 esc, file, line, func);
    int n = backtrace(frames, (int)(sizeof frames / sizeof frames[0]));
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    abort();
}
