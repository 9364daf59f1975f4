/* lib/heap.c - process-wide malloc settings (see heap.h). */
#include "lib/heap.h"

#include <malloc.h>
#include <stdio.h>
#include <unistd.h>

static long rss_bytes(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f && fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = 0;
    if (f)
        fclose(f);
    return rss * sysconf(_SC_PAGESIZE);
}

long spw_heap_release_idle(void)
{
    const long before = rss_bytes();
    malloc_trim(0);
    const long after = rss_bytes();
    return before > after ? before - after : 0;
}

void spw_heap_keep_freed(void)
{
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, SPW_HEAP_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, SPW_HEAP_TRIM_THRESHOLD);
}
