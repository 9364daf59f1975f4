/* client/logs.c - libspillway's log settings for its host (spw_set_log_callback, spw_set_log_level): a thin
 * face over lib/log.c, which holds the mechanism (level filtering, the sink and its lock). Not a logger of its
 * own: no buffering, no formatting. Thread model: as lib/log.h (any thread; the callback runs on the thread
 * that logs). */
#include "spillway/client.h"

#include <errno.h>

#include "lib/log.h"

int spw_set_log_callback(void (*fn)(int level, const char *component, const char *msg, void *user), void *user)
{
    return spw_log_set_sink(fn, user);
}

int spw_set_log_level(int level)
{
    if (level < SPW_LOG_DEBUG || level > SPW_LOG_ERROR)
        return -EINVAL;
    spw_log_set_level((enum spw_log_level)level);
    return 0;
}
