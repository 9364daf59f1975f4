/* lib/failpoint.h - test-only failpoints: SPILLWAY_FAILPOINT=<name>:<N>:<mode> makes the Nth pass of the
 * code at <name> (counted from 1 in this process) report <mode>; every other pass, and every process
 * without the variable, sees nothing. One failpoint per process; fires once. Thread-safe. */
#ifndef SPW_LIB_FAILPOINT_H
#define SPW_LIB_FAILPOINT_H

#include <stdbool.h>
#include <stddef.h>

/* Count one pass at name; true on the armed Nth pass, with its mode (at most 15 characters) in mode. */
bool spw_failpoint(const char *name, char *mode, size_t modelen);

#endif
