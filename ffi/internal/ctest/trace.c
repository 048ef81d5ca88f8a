#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctest.h"

static char trace_buf[1 << 16];
static size_t trace_len;

void ctest_say(const char* s)
{
    size_t n = strlen(s);
    if (trace_len + n + 2 > sizeof(trace_buf)) {
        return;
    }
    memcpy(trace_buf + trace_len, s, n);
    trace_len += n;
    trace_buf[trace_len++] = '\n';
    trace_buf[trace_len] = 0;
}

void ctest_sayf(const char* fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    ctest_say(line);
}

const char* ctest_trace(void)
{
    return trace_buf;
}

void ctest_trace_reset(void)
{
    trace_len = 0;
    trace_buf[0] = 0;
}
