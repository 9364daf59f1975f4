/* tests/gpuemu/gpuemu.c - an emulation of the CUDA plugin on the host, for tests without a device: the same
 * ABI (ops/cuda/gpu_plugin.h), "device" addresses that are host pointers, and the kernels as loops over the
 * very per-pixel functions the CUDA kernels run (ops/cuda/pixel.h). Knobs from the environment:
 * SPW_GPUEMU_FREE_MB (free memory it reports, default 1024), SPW_GPUEMU_DEVICES (default 1), and
 * SPW_GPUEMU_FAIL=open|reserve|sync to make that call fail (sync@N: every sync after the first N). Built
 * as build/lib/libspillway-gpuemu.so and loaded through SPILLWAY_GPU_PLUGIN. A context is used by one
 * thread at a time. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/gpu_plugin.h"
#include "ops/cuda/pixel.h"

struct emu {
    void *reserved;
    long syncs;
    char err[256];
};

const struct spw_gpu_plugin *spw_gpu_plugin_v1(void);

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static int failing(const char *what)
{
    const char *v = getenv("SPW_GPUEMU_FAIL");
    return v && strcmp(v, what) == 0;
}

static const char *emu_version(void) { return "host emulation (tests/gpuemu)"; }

static int emu_open(int device, void **out, char *err, size_t errlen)
{
    const int n = env_int("SPW_GPUEMU_DEVICES", 1);
    if (failing("open") || device < 0 || device >= n) {
        snprintf(err, errlen, "no CUDA device %d (emulated: %d devices)", device, n);
        return -ENODEV;
    }
    struct emu *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    *out = e;
    return 0;
}

static void emu_close(void *ctx)
{
    struct emu *e = ctx;
    if (e)
        free(e->reserved);
    free(e);
}

static const char *emu_last_error(void *ctx) { return ((struct emu *)ctx)->err; }

static int emu_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes)
{
    *free_bytes = (size_t)env_int("SPW_GPUEMU_FREE_MB", 1024) << 20;
    *total_bytes = *free_bytes * 2;
    return 0;
}

static int emu_reserve(void *ctx, size_t bytes, spw_dptr *base)
{
    struct emu *e = ctx;
    if (failing("reserve") || e->reserved || !(e->reserved = malloc(bytes))) {
        snprintf(e->err, sizeof e->err, "cudaMalloc of the arena: out of memory (emulated)");
        return -ENOMEM;
    }
    *base = (spw_dptr)(uintptr_t)e->reserved;
    return 0;
}

static int emu_upload(void *ctx, spw_dptr dst, const void *src, size_t n)
{
    memcpy((void *)(uintptr_t)dst, src, n);
    return 0;
}

static int emu_download(void *ctx, void *dst, spw_dptr src, size_t n)
{
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return 0;
}

static int emu_copy(void *ctx, spw_dptr dst, spw_dptr src, size_t n)
{
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return 0;
}

static int emu_upload2d(void *ctx, spw_dptr dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t rows)
{
    for (size_t y = 0; y < rows; y++)
        memcpy((uint8_t *)(uintptr_t)dst + y * dpitch, (const uint8_t *)src + y * spitch, width);
    return 0;
}

static int emu_sync(void *ctx)
{
    struct emu *e = ctx;
    const char *v = getenv("SPW_GPUEMU_FAIL");
    if (failing("sync") || (v && strncmp(v, "sync@", 5) == 0 && ++e->syncs > atol(v + 5))) {
        snprintf(e->err, sizeof e->err, "a kernel or copy: unspecified launch failure (emulated)");
        return -EIO;
    }
    return 0;
}

static int emu_resample(void *ctx, const struct spw_gpu_resample *a)
{
    const int w3 = a->out_w * 3;
    const uint8_t *src = (const uint8_t *)(uintptr_t)a->src;
    uint8_t *tmp = (uint8_t *)(uintptr_t)a->tmp, *dst = (uint8_t *)(uintptr_t)a->dst;
    for (int r = 0; r < a->row_count; r++) {
        const uint8_t *row = src + (size_t)(a->row_first + r - a->src_y0) * a->src_stride +
                             3 * (size_t)(a->src_x_first - a->src_x0);
        for (int i = 0; i < w3; i++)
            tmp[(size_t)r * w3 + i] = a->need_h ? spw_px_resample_h(a, row, (const int32_t *)(uintptr_t)a->bounds_h,
                                                                    (const int32_t *)(uintptr_t)a->kk_h, i / 3, i % 3)
                                                : row[i];
    }
    for (int yy = 0; yy < a->out_h; yy++)
        for (int i = 0; i < w3; i++)
            dst[(size_t)yy * w3 + i] = a->need_v ? spw_px_resample_v(a, tmp, (size_t)w3,
                                                                     (const int32_t *)(uintptr_t)a->bounds_v,
                                                                     (const int32_t *)(uintptr_t)a->kk_v, yy, i)
                                                 : tmp[(size_t)yy * w3 + i];
    return 0;
}

static int emu_sink(void *ctx, const struct spw_gpu_sink *a)
{
    for (int y = 0; y < a->h; y++)
        for (int i = 0; i < a->w * 3; i++)
            spw_px_sink(a, (const uint8_t *)(uintptr_t)a->src, (void *)(uintptr_t)a->dst,
                        (const void *)(uintptr_t)a->lut, i / 3, y, i % 3);
    return 0;
}

static int emu_color(void *ctx, const struct spw_gpu_color *a)
{
    const uint8_t *src = (const uint8_t *)(uintptr_t)a->src.data, *lut = (const uint8_t *)(uintptr_t)a->lut;
    uint8_t *dst = (uint8_t *)(uintptr_t)a->dst.data;
    if (a->op != SPW_GPU_LUT3 && src == dst)
        return -EINVAL;         /* as the device: those read neighbours (or other channels) of what they write */
    for (int y = 0; y < a->src.h; y++)
        for (int x = 0; x < a->src.w; x++)
            for (int c = 0; c < 3; c++)
                dst[(size_t)y * a->dst.stride + 3 * (size_t)x + c] = spw_px_color(a, src, lut, x, y, c);
    return 0;
}

static int emu_stats(void *ctx, const struct spw_gpu_image_stats *a)
{
    uint64_t *hist = (uint64_t *)(uintptr_t)a->hist, *sum = (uint64_t *)(uintptr_t)a->luma_sum;
    memset(hist, 0, sizeof(uint64_t) * 3 * 256);
    *sum = 0;
    for (int y = 0; y < a->src.h; y++) {
        const uint8_t *p = (const uint8_t *)(uintptr_t)a->src.data + (size_t)y * a->src.stride;
        for (int x = 0; x < a->src.w; x++, p += 3) {
            for (int c = 0; c < 3; c++)
                hist[c * 256 + p[c]]++;
            *sum += (uint64_t)spw_px_luma(p[0], p[1], p[2]);
        }
    }
    return 0;
}

static int emu_make_lut(void *ctx, const struct spw_gpu_make_lut *a)
{
    const uint64_t *hist = (const uint64_t *)(uintptr_t)a->hist, *sum = (const uint64_t *)(uintptr_t)a->luma_sum;
    uint8_t *lut = (uint8_t *)(uintptr_t)a->lut;
    for (int c = 0; c < 3; c++) {
        if (a->kind == SPW_GPU_LUT_EQUALIZE)
            spw_px_equalize_lut(hist + c * 256, lut + c * 256);
        else if (a->kind == SPW_GPU_LUT_AUTOCONTRAST)
            spw_px_autocontrast_lut(hist + c * 256, lut + c * 256);
        else
            for (int v = 0; v < 256; v++)
                lut[c * 256 + v] = spw_px_blend(a->alpha, spw_px_mean_luma(*sum, a->n), v);
    }
    return 0;
}

static int emu_warp(void *ctx, const struct spw_gpu_warp *a)
{
    uint8_t *dst = (uint8_t *)(uintptr_t)a->dst.data;
    for (int y = 0; y < a->dst.h; y++)
        for (int x = 0; x < a->dst.w; x++)
            spw_px_warp(a, (const int32_t *)(uintptr_t)a->xi, (const int32_t *)(uintptr_t)a->yi, x, y,
                        dst + (size_t)y * a->dst.stride + 3 * (size_t)x);
    return 0;
}

static const struct spw_gpu_plugin plugin = {
    .abi = SPW_GPU_ABI, .dlpack_device_type = 1 /* kDLCPU: its "device" memory is host memory */,
    .version = emu_version, .open = emu_open, .close = emu_close, .last_error = emu_last_error,
    .mem_info = emu_mem_info, .reserve = emu_reserve, .upload = emu_upload, .download = emu_download,
    .copy = emu_copy, .upload2d = emu_upload2d, .sync = emu_sync, .resample = emu_resample, .sink = emu_sink,
    .color = emu_color, .stats = emu_stats, .make_lut = emu_make_lut, .warp = emu_warp,
};

__attribute__((visibility("default"))) const struct spw_gpu_plugin *spw_gpu_plugin_v1(void)
{
    return &plugin;
}
