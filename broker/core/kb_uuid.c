#include "kb_uuid.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

void kb_uuid_format(const kp_uuid *u, char out[23])
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)u->b[i] << 16;
        if (i + 1 < 16)
            v |= (uint32_t)u->b[i + 1] << 8;
        if (i + 2 < 16)
            v |= u->b[i + 2];
        out[o++] = b64[(v >> 18) & 63];
        out[o++] = b64[(v >> 12) & 63];
        if (i + 1 < 16)
            out[o++] = b64[(v >> 6) & 63];
        if (i + 2 < 16)
            out[o++] = b64[v & 63];
    }
    out[o] = '\0';
}

static int b64_value(char ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    return ch == '-' ? 62 : ch == '_' ? 63 : -1;
}

bool kb_uuid_parse(const char *s, kp_uuid *u)
{
    if (strlen(s) != 22)
        return false;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < 22; i++) {
        int v = b64_value(s[i]);
        if (v < 0)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            u->b[o++] = (uint8_t)(acc >> bits);
        }
    }
    return (acc & ((1u << bits) - 1)) == 0; /* the 4 spare bits are zero */
}

void kb_uuid_random(kp_uuid *u)
{
    do {
        if (getrandom(u->b, sizeof(u->b), 0) != (ssize_t)sizeof(u->b)) {
            /* getrandom on Linux does not fail for 16 bytes; mix time in anyway */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            memcpy(u->b, &ts, sizeof(ts) < sizeof(u->b) ? sizeof(ts) : sizeof(u->b));
        }
        u->b[6] = (uint8_t)((u->b[6] & 0x0f) | 0x40); /* version 4 */
        u->b[8] = (uint8_t)((u->b[8] & 0x3f) | 0x80);
        /* Kafka's Uuid.randomUuid(): never zero, never printed with a leading
         * '-' (62 in base64url), which command lines would take for an option. */
    } while (kp_uuid_is_zero(u) || u->b[0] >> 2 == 62);
}

void kb_uuid_hex(const kp_uuid *u, char out[33])
{
    for (size_t i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", u->b[i]);
}

bool kb_uuid_parse_hex(const char *s, kp_uuid *u)
{
    if (strlen(s) != 32)
        return false;
    for (size_t i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        u->b[i] = (uint8_t)v;
    }
    return true;
}
