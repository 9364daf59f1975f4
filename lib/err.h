/* lib/err.h - Spillway error codes: 0 is success, negative is an error (-errno or a SPW_E* code).
 * One X-macro list generates the enum and spw_strerror(). Thread-safe (pure functions). */
#ifndef SPW_LIB_ERR_H
#define SPW_LIB_ERR_H

#include <stddef.h>

#define SPW_ERRORS(X)                                                          \
    X(SPW_ESPEC,        -1001, "invalid pipeline spec")                       \
    X(SPW_EDECODE,      -1002, "corrupt or undecodable input")                \
    X(SPW_ETOOBIG,      -1003, "input exceeds a configured size cap")         \
    X(SPW_ESOURCE,      -1004, "data source error")                           \
    X(SPW_ECLOSED,      -1005, "closed")                                      \
    X(SPW_EUNSUPPORTED, -1006, "unsupported input")                           \
    X(SPW_EFORMAT,      -1007, "malformed file format")                       \
    X(SPW_EINTERNAL,    -1008, "internal error")                              \
    X(SPW_EFORKED,      -1009, "used in a forked child process")              \
    X(SPW_EUSER,        -1010, "the user's function failed")

/* spillway/client.h repeats these codes for users (one header, nothing of lib/): whichever a file includes
 * first defines them; tests/unit/check_api.c checks that the two lists agree. */
#ifndef SPW_ERR_CODES_DEFINED
#define SPW_ERR_CODES_DEFINED
enum spw_err {
#define SPW_ERR_ENUM(name, code, msg) name = code,
    SPW_ERRORS(SPW_ERR_ENUM)
#undef SPW_ERR_ENUM
};
#endif

/* Human-readable text for a return code (a SPW_E* code or -errno). Never NULL. Part of libspillway's API. */
__attribute__((visibility("default"))) const char *spw_strerror(int err);
/* Write the formatted message into err (when err and errlen) and return rc: `return spw_fail(err, errlen,
 * SPW_EDECODE, "...", ...);` in functions that report through a caller's buffer. */
int spw_fail(char *err, size_t errlen, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
