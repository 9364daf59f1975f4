/* lib/heap.c - process-wide malloc settings (see heap.h). */
#include "lib/heap.h"

#include <malloc.h>

void spw_heap_keep_freed(void)
{
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_MMAP_THRESHOLD, SPW_HEAP_MMAP_THRESHOLD);
    mallopt(M_TRIM_THRESHOLD, SPW_HEAP_TRIM_THRESHOLD);
}
