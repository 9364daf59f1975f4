/* lib/err.c - spw_strerror(): text for SPW_E* codes and -errno values; spw_fail() for error messages.
 * Pure; safe from any thread. */
#include "lib/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int spw_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen)
        vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

const char *spw_strerror(int err)
{
    switch (err) {
    case 0: return "success";
#define SPW_ERR_CASE(name, code, msg) case code: return msg;
    SPW_ERRORS(SPW_ERR_CASE)
#undef SPW_ERR_CASE
    default: break;
    }
    if (err < 0 && err > -4096)
        return strerror(-err);
    return "unknown error";
}
