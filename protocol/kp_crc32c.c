#include "kp_crc32c.h"

#include <string.h>

#include "kp_crc32c_tab.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KP_CRC32C_X86 1
#include <nmmintrin.h>
#else
#define KP_CRC32C_X86 0
#endif

static uint32_t crc_bytes_sw(uint32_t c, const uint8_t *p, size_t len)
{
    while (len-- > 0)
        c = (c >> 8) ^ kp_crc32c_tab[0][(c ^ *p++) & 0xffu];
    return c;
}

/* Little-endian load of 8 bytes, independent of host order. */
static uint64_t load_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint32_t kp_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    uint32_t c = ~crc;
    while (len >= 8) {
        uint64_t w = load_le64(p) ^ c;
        c = kp_crc32c_tab[7][w & 0xffu] ^ kp_crc32c_tab[6][(w >> 8) & 0xffu] ^
            kp_crc32c_tab[5][(w >> 16) & 0xffu] ^ kp_crc32c_tab[4][(w >> 24) & 0xffu] ^
            kp_crc32c_tab[3][(w >> 32) & 0xffu] ^ kp_crc32c_tab[2][(w >> 40) & 0xffu] ^
            kp_crc32c_tab[1][(w >> 48) & 0xffu] ^ kp_crc32c_tab[0][w >> 56];
        p += 8;
        len -= 8;
    }
    return ~crc_bytes_sw(c, p, len);
}

#if KP_CRC32C_X86
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
                                                         size_t len)
{
    uint64_t c = ~crc;
    while (len > 0 && ((uintptr_t)p & 7u) != 0) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, sizeof(w));
        c = _mm_crc32_u64(c, w);
        p += 8;
        len -= 8;
    }
    while (len-- > 0)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

bool kp_crc32c_hw_available(void)
{
#if KP_CRC32C_X86
    return __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

uint32_t kp_crc32c(uint32_t crc, const void *buf, size_t len)
{
#if KP_CRC32C_X86
    if (__builtin_cpu_supports("sse4.2"))
        return crc_hw(crc, buf, len);
#endif
    return kp_crc32c_sw(crc, buf, len);
}
