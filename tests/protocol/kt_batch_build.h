/*
 * kt_batch_build: test helper that builds valid record batch v2 bytes.
 *
 * Job: produce a batch of n uncompressed records (null key, value of
 * value_len bytes filled with a pattern, no headers), timestamps ts0 + i *
 * ts_step, base offset 0, with a correct CRC-32C.
 * Ownership: returns malloc'd bytes the caller frees.
 * Threading: any. Errors: aborts the test on out of memory.
 */
#ifndef KT_BATCH_BUILD_H
#define KT_BATCH_BUILD_H

#include <stddef.h>
#include <stdint.h>

uint8_t *kt_batch_build(int32_t n, size_t value_len, int64_t ts0, int64_t ts_step, size_t *len);

#endif
