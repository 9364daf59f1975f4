/* lib/heap.h - process-wide malloc settings for Spillway's daemons and CLI, which move 100 KB-1 MB buffers
 * (messages, elements, decode scratch) between threads. Call spw_heap_keep_freed() first thing in main(),
 * before any thread starts. Thread model: process-global; mallopt itself is thread-safe. */
#ifndef SPW_LIB_HEAP_H
#define SPW_LIB_HEAP_H

#define SPW_HEAP_MMAP_THRESHOLD (256 << 20)    /* below this, buffers come from the heap, not mmap */
#define SPW_HEAP_TRIM_THRESHOLD (512 << 20)    /* free memory the heap keeps rather than give back */

/* One malloc arena, no mmap per buffer, freed memory kept: fresh pages are never faulted in again for each
 * buffer. Per-thread arenas grow in 64 MB heaps that glibc unmaps whenever one empties, whatever the trim
 * threshold; a client whose in-flight data swings by tens of MB (a CPU quota stalling it) re-faulted its
 * buffers on every swing (15-24 faults per 150 KB element against 1, 3x the CPU per element: docs/planner.md). */
void spw_heap_keep_freed(void);
/* Give the freed memory the heap keeps back to the OS (malloc_trim): for a daemon gone idle (a worker with no
 * job for a while, the dispatcher between bursts of calls), so RSS after a burst does not stay at its peak.
 * Returns the bytes of RSS given back (from /proc/self/statm; 0 when unknown). Any thread. */
long spw_heap_release_idle(void);

#endif
