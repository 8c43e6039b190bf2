/*
 * fuzz: the libFuzzer entry point every target in tests/fuzz defines.
 *
 * Job: one declaration shared by the targets and by replay.c, the driver
 * that runs a corpus through a target without libFuzzer (gcc builds).
 *
 * Invariants: a target returns 0 for every input and never keeps state
 * between calls that changes its behaviour; it aborts (through a sanitizer
 * or abort()) only on a real bug.
 *
 * Threading: one call at a time.
 */
#ifndef KT_FUZZ_H
#define KT_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
