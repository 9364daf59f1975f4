/* lib/utf8.h - UTF-8 well-formedness as JSON, proto3 strings and Python's str.decode require it: no overlong
 * forms, surrogates or code points past U+10FFFF. Pure. */
#ifndef SPW_LIB_UTF8_H
#define SPW_LIB_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the len bytes at s are well-formed UTF-8 (a NUL byte is U+0000). */
bool spw_utf8_valid(const uint8_t *s, size_t len);

#endif
