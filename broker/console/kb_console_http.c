/* kb_console's HTTP listener (kb_console.h): waits for broker/http. */
#include <stdio.h>

#include "kb_console.h"
#include "kb_console_http.h"

kp_err kb_console_serve_start(kb_console *c, char *err, size_t errlen)
{
    (void)c;
    snprintf(err, errlen, "runnel.console.listener: this build has no HTTP server yet");
    return KP_ERR__INVAL;
}

void kb_console_serve_stop(kb_console *c)
{
    (void)c;
}
