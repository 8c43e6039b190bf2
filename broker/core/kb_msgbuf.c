#include "kb_msgbuf.h"

#include <stdarg.h>
#include <stdio.h>

void kb_msgf(kb_msgbuf *msg, const char *fmt, ...)
{
    if (msg == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg->text, sizeof(msg->text), fmt, ap);
    va_end(ap);
}
