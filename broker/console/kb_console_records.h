/*
 * kb_console_records: reading records of one partition for the console, as
 * JSON (key, value and header values base64, so any bytes survive; a hint
 * says whether each is text).
 *
 * Job: from a start offset, read whole batches through the log's own read
 * path (ks_log_read below the high watermark, then one pread of that file
 * range, as the copying fetch path does), decompress them, skip control
 * batches and records before the start, and emit at most max records.
 *
 * Invariants:
 *   1. At most KB_CONSOLE_READ_MAX bytes are read from the file, and a
 *      decompressed batch is at most KB_CONSOLE_INFLATE_MAX bytes, per call.
 *   2. A corrupt batch ends the read (what was read before it is kept).
 *
 * Ownership: the slice and buffers are released before returning.
 * Threading: loop thread (the log's owner).
 */
#ifndef KB_CONSOLE_RECORDS_H
#define KB_CONSOLE_RECORDS_H

#include <stdint.h>

#include "kb_json.h"
#include "ks_log.h"

#define KB_CONSOLE_INFLATE_MAX (8 << 20)

/* Writes "records": [...] and "nextOffset" into the open object of j. */
kp_err kb_console_records_read(ks_log *log, int64_t offset, int32_t max, kb_json *j);

#endif
