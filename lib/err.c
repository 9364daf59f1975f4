/* lib/err.c - spw_strerror(): text for SPW_E* codes and -errno values.
 * Pure; safe from any thread. */
#include "lib/err.h"

#include <string.h>

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
