/*
 * kb_file: the small state files the broker keeps beside its logs (topic
 * registry, configs, credentials, quotas, ACLs), written atomically.
 *
 * Job: write dir/name atomically (temp file, fdatasync, rename, directory
 * fsync), read one back line by line, and %-escape a value for one line.
 *
 * Invariants: a reader sees the old file or the new one, never a mix, and
 * after a successful write the new one survives a power loss.
 *
 * Errors: KP_ERR__IO, or KP_ERR__NOSPC for a full disk; a missing file reads
 * as empty.
 *
 * Threading: safe on any thread for distinct files; blocks on disk I/O.
 */
#ifndef KB_FILE_H
#define KB_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "kp_types.h"

/* mkdir -p with mode 0755; 0, or -1 with errno. */
int kb_file_mkdirs(const char *dir);
kp_err kb_file_write_atomic(const char *dir, const char *name, const char *data, size_t len);
/* Calls line(arg, text) for each line of dir/name (newline cut off) until
 * it returns an error; a missing file is empty. KP_ERR__IO on read errors. */
kp_err kb_file_read_lines(const char *dir, const char *name, kp_err (*line)(void *arg, char *text),
                          void *arg);
/* Writes dir/name atomically from what emit(arg, f) prints into f. */
kp_err kb_file_write_stream(const char *dir, const char *name, void (*emit)(void *arg, FILE *f),
                            void *arg);
/* %-escapes '%', CR and LF of v into f; kb_value_unescape undoes it in place. */
void kb_value_escape(FILE *f, const char *v);
void kb_value_unescape(char *v);

#endif
