/* ops/gpu_load.h - finds and loads the CUDA plugin (ops/cuda/gpu_plugin.h) with dlopen: the path in
 * SPILLWAY_GPU_PLUGIN, else libspillway-gpu.so beside this build's libraries (the folder of the shared
 * library this code is in, or ../lib from a program's folder), else the dynamic loader's search path.
 * Loaded once per process and never unloaded. Thread-safe. */
#ifndef SPW_OPS_GPU_LOAD_H
#define SPW_OPS_GPU_LOAD_H

#include <stddef.h>

#include "ops/cuda/gpu_plugin.h"

#define SPW_GPU_PLUGIN_NAME "libspillway-gpu.so"

/* The plugin's table into *out and the file it came from into path. Returns 0, or -ENOENT (no plugin
 * found: the places tried in err) / -ENOEXEC (a file that is not a plugin of this ABI). */
int spw_gpu_load(const struct spw_gpu_plugin **out, char *path, size_t pathlen, char *err, size_t errlen);

#endif
