/*
 * kp_crc32c: CRC-32C (Castagnoli), the checksum of record batch v2.
 *
 * Job: compute CRC-32C over byte ranges, with the SSE4.2 crc32 instruction
 * when the running CPU has it and a portable slicing-by-8 table otherwise.
 *
 * Invariants:
 *   1. kp_crc32c(0, "123456789", 9) == 0xE3069283 (the check value).
 *   2. Hardware and table paths return identical results for every input.
 *   3. kp_crc32c(kp_crc32c(0, a, n), b, m) == CRC of a followed by b, so a
 *      range may be checksummed in pieces.
 *
 * Ownership: no allocation; inputs are borrowed for the call only.
 * Threading: pure functions, callable from any thread.
 * Errors: none.
 */
#ifndef KP_CRC32C_H
#define KP_CRC32C_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) with len bytes of buf; picks the fastest path. */
uint32_t kp_crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable table path, exposed so tests can compare both paths. */
uint32_t kp_crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* True when kp_crc32c uses the SSE4.2 instruction on this CPU. */
bool kp_crc32c_hw_available(void);

#endif
