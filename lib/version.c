/* lib/version.c - the build's version string (see version.h). SPW_BUILD_VERSION comes from
 * build/gen/lib/version_gen.h, which the Makefile rewrites only when `git describe` changes. */
#include "lib/version.h"

#include "lib/version_gen.h"

#define STR2(x) #x
#define STR(x) STR2(x)

const char *spw_version(void)
{
    return "spillway " SPW_BUILD_VERSION " (protocol " STR(SPW_PROTOCOL_VERSION) ")";
}

const char *spw_build_version(void)
{
    return SPW_BUILD_VERSION;
}
