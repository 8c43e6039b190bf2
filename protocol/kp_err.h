/*
 * kp_err: the one error type of Runnel.
 *
 * Job: name every error a function can return. Values from -1 up are exactly
 * Kafka's wire error codes; internal codes (KP_ERR__*) sit at -1000 and below
 * and are translated by kp_err_to_wire() before anything is encoded.
 *
 * Invariants:
 *   1. KP_ERR_NONE == 0, and every wire code equals Kafka's Errors.java code.
 *   2. kp_err_to_wire() never returns an internal code.
 *
 * Ownership: kp_err_name() returns a static string.
 * Threading: all functions are pure and callable from any thread.
 */
#ifndef KP_ERR_H
#define KP_ERR_H

#include <stdbool.h>
#include <stdint.h>

typedef enum kp_err {
#define X(name, code, retriable) KP_ERR_##name = (code),
#include "kp_err.def"
#undef X
} kp_err;

/* Optional detail filled by the call that failed (like anet's error buffer). */
typedef struct kp_errctx {
    char msg[128];
    const char *file;
    int line;
    int sys_errno;
} kp_errctx;

/* "UNKNOWN_TOPIC_OR_PARTITION", "_IO", or "UNKNOWN" for a value not listed. */
const char *kp_err_name(kp_err err);

/* True for codes Kafka marks retriable. */
bool kp_err_retriable(kp_err err);

/* Maps internal codes to the wire code Kafka would send; wire codes pass through. */
int16_t kp_err_to_wire(kp_err err);

/* Fills ctx (if non-NULL) with a formatted message and the caller's location; returns err. */
kp_err kp_errctx_set(kp_errctx *ctx, kp_err err, int sys_errno, const char *file, int line,
                     const char *fmt, ...) __attribute__((format(printf, 6, 7)));

#define KP_ERRCTX(ctx, err, sys_errno, ...) \
    kp_errctx_set((ctx), (err), (sys_errno), __FILE__, __LINE__, __VA_ARGS__)

#endif
