/* lib/failpoint.c - test-only failpoints (see failpoint.h). Thread-safe: the variable is read once under
 * pthread_once and passes are counted with an atomic. */
#include "lib/failpoint.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char armed_name[32], armed_mode[16];
static int armed_at;    /* 0: none */
static int passes;

static void read_env(void)
{
    const char *f = getenv("SPILLWAY_FAILPOINT");
    int at = 0;
    if (f && sscanf(f, "%31[^:]:%d:%15s", armed_name, &at, armed_mode) == 3 && at > 0)
        armed_at = at;
}

bool spw_failpoint(const char *name, char *mode, size_t modelen)
{
    pthread_once(&once, read_env);
    if (!armed_at || strcmp(name, armed_name) != 0)
        return false;
    if (__atomic_add_fetch(&passes, 1, __ATOMIC_RELAXED) != armed_at)
        return false;
    snprintf(mode, modelen, "%s", armed_mode);
    return true;
}
