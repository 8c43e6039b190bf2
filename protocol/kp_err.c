#include "kp_err.h"

#include <stdarg.h>
#include <stdio.h>

const char *kp_err_name(kp_err err)
{
    switch (err) {
#define X(name, code, retriable) \
    case KP_ERR_##name:          \
        return #name;
#include "kp_err.def"
#undef X
    }
    return "UNKNOWN";
}

bool kp_err_retriable(kp_err err)
{
    switch (err) {
#define X(name, code, retriable) \
    case KP_ERR_##name:          \
        return (retriable) != 0;
#include "kp_err.def"
#undef X
    }
    return false;
}

int16_t kp_err_to_wire(kp_err err)
{
    switch (err) {
    case KP_ERR__IO:
    case KP_ERR__NOSPC:
        return KP_ERR_KAFKA_STORAGE_ERROR;
    case KP_ERR__CORRUPT:
        return KP_ERR_CORRUPT_MESSAGE;
    case KP_ERR__UNDERFLOW:
    case KP_ERR__MALFORMED:
    case KP_ERR__INVAL:
        return KP_ERR_INVALID_REQUEST;
    case KP_ERR__NOENT:
        return KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    case KP_ERR__EXISTS:
        return KP_ERR_TOPIC_ALREADY_EXISTS;
    default:
        break;
    }
    if ((int)err <= -1000)
        return KP_ERR_UNKNOWN_SERVER_ERROR;
    return (int16_t)err;
}

kp_err kp_errctx_set(kp_errctx *ctx, kp_err err, int sys_errno, const char *file, int line,
                     const char *fmt, ...)
{
    if (ctx == NULL)
        return err;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->msg, sizeof(ctx->msg), fmt, ap);
    va_end(ap);
    ctx->file = file;
    ctx->line = line;
    ctx->sys_errno = sys_errno;
    return err;
}
