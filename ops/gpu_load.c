/* ops/gpu_load.c - dlopen of the CUDA plugin (see gpu_load.h). The first call's result (plugin or error)
 * is kept for the process, under a once-guard. */
#include "ops/gpu_load.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    pthread_once_t once;
    int rc;
    const struct spw_gpu_plugin *plugin;
    char path[PATH_MAX], err[1024];
} loaded = {PTHREAD_ONCE_INIT, 0, NULL, "", ""};

/* Try one file: 0 (loaded), -ENOENT (dlopen failed: why appended to tried) or -ENOEXEC. */
static int try_path(const char *path, char *tried, size_t triedlen)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const size_t n = strlen(tried);
        snprintf(tried + n, triedlen - n, "%s%s", n ? "; " : "", dlerror());
        return -ENOENT;
    }
    spw_gpu_entry_fn entry = (spw_gpu_entry_fn)dlsym(h, SPW_GPU_ENTRY);
    const struct spw_gpu_plugin *p = entry ? entry() : NULL;
    if (!p || p->abi != SPW_GPU_ABI) {
        snprintf(loaded.err, sizeof loaded.err, "%s is not a Spillway GPU plugin of ABI %d (%s)", path, SPW_GPU_ABI,
                 !entry ? "no " SPW_GPU_ENTRY : !p ? "no table" : "another ABI");
        dlclose(h);
        return -ENOEXEC;
    }
    loaded.plugin = p;
    snprintf(loaded.path, sizeof loaded.path, "%s", path);
    return 0;
}

/* dir/../lib/NAME when dir ends in /bin, else dir/NAME, of the file this code was loaded from. */
static int beside_us(char *out, size_t outlen)
{
    Dl_info info;
    char self[PATH_MAX];
    if (!dladdr((void *)&spw_gpu_load, &info) || !info.dli_fname || !realpath(info.dli_fname, self))
        return -1;
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = 0;
    const size_t n = strlen(self);
    const bool bin = n >= 4 && strcmp(self + n - 4, "/bin") == 0;
    if (bin)
        self[n - 4] = 0;
    return snprintf(out, outlen, "%s%s/%s", self, bin ? "/lib" : "", SPW_GPU_PLUGIN_NAME) < (int)outlen ? 0 : -1;
}

static void load_once(void)
{
    char tried[768] = "", path[PATH_MAX];
    const char *env = getenv("SPILLWAY_GPU_PLUGIN");
    if (env && *env) {
        loaded.rc = try_path(env, tried, sizeof tried);
    } else {
        loaded.rc = -ENOENT;
        if (beside_us(path, sizeof path) == 0 && access(path, F_OK) == 0)
            loaded.rc = try_path(path, tried, sizeof tried);
        if (loaded.rc == -ENOENT)
            loaded.rc = try_path(SPW_GPU_PLUGIN_NAME, tried, sizeof tried);
    }
    if (loaded.rc == -ENOENT)
        snprintf(loaded.err, sizeof loaded.err, "no GPU plugin (%s)", tried);
}

int spw_gpu_load(const struct spw_gpu_plugin **out, char *path, size_t pathlen, char *err, size_t errlen)
{
    pthread_once(&loaded.once, load_once);
    if (loaded.rc == 0) {
        *out = loaded.plugin;
        if (path && pathlen)
            snprintf(path, pathlen, "%s", loaded.path);
    } else if (err && errlen) {
        snprintf(err, errlen, "%s", loaded.err);
    }
    return loaded.rc;
}
