/* lib/methods.c - the methods' paths (see methods.h). Constant data; any thread. */
#include "lib/methods.h"

#include <stddef.h>

static const char *const paths[SPW_METHOD_COUNT] = {
#define SPW_METHOD_PATH(ID, SERVICE, NAME) [SPW_M_##ID] = "/spillway.v1." #SERVICE "/" #NAME,
    SPW_METHODS(SPW_METHOD_PATH)
#undef SPW_METHOD_PATH
};

const char *spw_method_path(enum spw_method m)
{
    return (unsigned)m < SPW_METHOD_COUNT ? paths[m] : NULL;
}
