/* ops/cuda/plugin.cu - libspillway-gpu.so: the CUDA side of ops/cuda/gpu_plugin.h. One context per device
 * user: a non-blocking stream at the lowest priority the device offers (the trainer's kernels come first),
 * one reservation for the arena, async copies and the kernels, whose per-pixel arithmetic is
 * ops/cuda/pixel.h. Built by nvcc with a static cudart; loaded with dlopen. A context is used by one
 * thread at a time. */
#include <cuda_runtime.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cuda/gpu_plugin.h"
#include "ops/cuda/pixel.h"

struct gpu_ctx {
    int device;
    cudaStream_t stream;
    void *reserved;
    char err[256];
};

#define THREADS 256

static int fail(struct gpu_ctx *g, cudaError_t e, const char *what)
{
    snprintf(g->err, sizeof g->err, "%s: %s", what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

#define CK(g, call, what)                         \
    do {                                          \
        cudaError_t e_ = (call);                  \
        if (e_ != cudaSuccess)                    \
            return fail((g), e_, (what));         \
    } while (0)

static const char *plugin_version(void)
{
    static char v[64];
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    snprintf(v, sizeof v, "cuda runtime %d.%d", rt / 1000, rt % 1000 / 10);
    return v;
}

static int plugin_open(int device, void **out, char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(err, errlen, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return -ENODEV;
    }
    if (device < 0 || device >= n) {
        snprintf(err, errlen, "no CUDA device %d (this machine has %d)", device, n);
        return -ENODEV;
    }
    struct gpu_ctx *g = (struct gpu_ctx *)calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    g->device = device;
    int least = 0, greatest = 0;
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaDeviceGetStreamPriorityRange(&least, &greatest)) !=
        cudaSuccess || (e = cudaStreamCreateWithPriority(&g->stream, cudaStreamNonBlocking, least)) != cudaSuccess) {
        snprintf(err, errlen, "CUDA device %d: %s", device, cudaGetErrorString(e));
        free(g);
        return -EIO;
    }
    *out = g;
    return 0;
}

static void plugin_close(void *ctx)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    if (!g)
        return;
    cudaSetDevice(g->device);
    cudaStreamSynchronize(g->stream);
    if (g->reserved)
        cudaFree(g->reserved);
    cudaStreamDestroy(g->stream);
    free(g);
}

static const char *plugin_last_error(void *ctx)
{
    return ((struct gpu_ctx *)ctx)->err;
}

static int plugin_mem_info(void *ctx, size_t *free_bytes, size_t *total_bytes)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaSetDevice(g->device), "cudaSetDevice");
    CK(g, cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
    return 0;
}

static int plugin_reserve(void *ctx, size_t bytes, spw_dptr *base)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    if (g->reserved) {
        snprintf(g->err, sizeof g->err, "the arena is reserved already");
        return -EINVAL;
    }
    CK(g, cudaSetDevice(g->device), "cudaSetDevice");
    CK(g, cudaMalloc(&g->reserved, bytes), "cudaMalloc of the arena");
    *base = (spw_dptr)(uintptr_t)g->reserved;
    return 0;
}

static int plugin_upload(void *ctx, spw_dptr dst, const void *src, size_t n)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaMemcpyAsync((void *)(uintptr_t)dst, src, n, cudaMemcpyHostToDevice, g->stream), "upload");
    return 0;
}

static int plugin_download(void *ctx, void *dst, spw_dptr src, size_t n)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaMemcpyAsync(dst, (const void *)(uintptr_t)src, n, cudaMemcpyDeviceToHost, g->stream), "download");
    return 0;
}

static int plugin_copy(void *ctx, spw_dptr dst, spw_dptr src, size_t n)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaMemcpyAsync((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, cudaMemcpyDeviceToDevice,
                          g->stream), "device copy");
    return 0;
}

static int plugin_upload2d(void *ctx, spw_dptr dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                           size_t rows)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaMemcpy2DAsync((void *)(uintptr_t)dst, dpitch, src, spitch, width, rows, cudaMemcpyHostToDevice,
                            g->stream), "2-d upload");
    return 0;
}

static int plugin_sync(void *ctx)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaStreamSynchronize(g->stream), "a kernel or copy");
    return 0;
}

/* ---- kernels: one thread per output byte ---- */

__global__ void k_resample_h(struct spw_gpu_resample a)
{
    const int r = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x, w3 = a.out_w * 3;
    if (i >= w3)
        return;
    const uint8_t *row = (const uint8_t *)(uintptr_t)a.src + (size_t)(a.row_first + r - a.src_y0) * a.src_stride +
                         3 * (size_t)(a.src_x_first - a.src_x0);
    uint8_t *out = (uint8_t *)(uintptr_t)a.tmp + (size_t)r * w3;
    out[i] = a.need_h ? spw_px_resample_h(&a, row, (const int32_t *)(uintptr_t)a.bounds_h,
                                          (const int32_t *)(uintptr_t)a.kk_h, i / 3, i % 3)
                      : row[i];
}

__global__ void k_resample_v(struct spw_gpu_resample a)
{
    const int yy = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x, w3 = a.out_w * 3;
    if (i >= w3)
        return;
    const uint8_t *rows = (const uint8_t *)(uintptr_t)a.tmp;
    uint8_t *out = (uint8_t *)(uintptr_t)a.dst + (size_t)yy * w3;
    out[i] = a.need_v ? spw_px_resample_v(&a, rows, (size_t)w3, (const int32_t *)(uintptr_t)a.bounds_v,
                                          (const int32_t *)(uintptr_t)a.kk_v, yy, i)
                      : rows[(size_t)yy * w3 + i];
}

__global__ void k_sink(struct spw_gpu_sink a)
{
    const int y = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.w * 3)
        return;
    spw_px_sink(&a, (const uint8_t *)(uintptr_t)a.src, (void *)(uintptr_t)a.dst, (const void *)(uintptr_t)a.lut,
                i / 3, y, i % 3);
}

static int plugin_resample(void *ctx, const struct spw_gpu_resample *a)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    const unsigned bx = (unsigned)((a->out_w * 3 + THREADS - 1) / THREADS);
    if (a->row_count > 0)
        k_resample_h<<<dim3(bx, (unsigned)a->row_count), THREADS, 0, g->stream>>>(*a);
    if (a->out_h > 0)
        k_resample_v<<<dim3(bx, (unsigned)a->out_h), THREADS, 0, g->stream>>>(*a);
    CK(g, cudaGetLastError(), "resample kernels");
    return 0;
}

static int plugin_sink(void *ctx, const struct spw_gpu_sink *a)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    const unsigned bx = (unsigned)((a->w * 3 + THREADS - 1) / THREADS);
    if (a->h > 0)
        k_sink<<<dim3(bx, (unsigned)a->h), THREADS, 0, g->stream>>>(*a);
    CK(g, cudaGetLastError(), "sink kernel");
    return 0;
}

__global__ void k_color(struct spw_gpu_color a)
{
    const int y = blockIdx.y, i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= a.src.w * 3)
        return;
    const uint8_t v = spw_px_color(&a, (const uint8_t *)(uintptr_t)a.src.data, (const uint8_t *)(uintptr_t)a.lut,
                                   i / 3, y, i % 3);
    ((uint8_t *)(uintptr_t)a.dst.data)[(size_t)y * a.dst.stride + i] = v;
}

/* Per block: histograms in shared memory and a partial luma sum, then added to the global ones. */
__global__ void k_stats(struct spw_gpu_image_stats a)
{
    __shared__ unsigned int hist[3 * 256];
    __shared__ unsigned long long sum;
    for (int k = threadIdx.x; k < 3 * 256; k += blockDim.x)
        hist[k] = 0;
    if (threadIdx.x == 0)
        sum = 0;
    __syncthreads();
    const int y = blockIdx.y;
    unsigned long long mine = 0;
    for (int x = blockIdx.x * blockDim.x + threadIdx.x; x < a.src.w; x += gridDim.x * blockDim.x) {
        const uint8_t *p = (const uint8_t *)(uintptr_t)a.src.data + (size_t)y * a.src.stride + 3 * (size_t)x;
        atomicAdd(&hist[p[0]], 1u);
        atomicAdd(&hist[256 + p[1]], 1u);
        atomicAdd(&hist[512 + p[2]], 1u);
        mine += (unsigned long long)spw_px_luma(p[0], p[1], p[2]);
    }
    atomicAdd(&sum, mine);
    __syncthreads();
    unsigned long long *gh = (unsigned long long *)(uintptr_t)a.hist;
    for (int k = threadIdx.x; k < 3 * 256; k += blockDim.x)
        if (hist[k])
            atomicAdd(&gh[k], (unsigned long long)hist[k]);
    if (threadIdx.x == 0)
        atomicAdd((unsigned long long *)(uintptr_t)a.luma_sum, sum);
}

/* One thread per channel: the table is a short sequential scan. */
__global__ void k_make_lut(struct spw_gpu_make_lut a)
{
    const int c = threadIdx.x;
    if (c >= 3)
        return;
    const uint64_t *hist = (const uint64_t *)(uintptr_t)a.hist + c * 256;
    uint8_t *lut = (uint8_t *)(uintptr_t)a.lut + c * 256;
    if (a.kind == SPW_GPU_LUT_EQUALIZE) {
        spw_px_equalize_lut(hist, lut);
    } else if (a.kind == SPW_GPU_LUT_AUTOCONTRAST) {
        spw_px_autocontrast_lut(hist, lut);
    } else {
        const int mean = spw_px_mean_luma(*(const uint64_t *)(uintptr_t)a.luma_sum, a.n);
        for (int v = 0; v < 256; v++)
            lut[v] = spw_px_blend(a.alpha, mean, v);
    }
}

__global__ void k_warp(struct spw_gpu_warp a)
{
    const int y = blockIdx.y, x = blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= a.dst.w)
        return;
    spw_px_warp(&a, (const int32_t *)(uintptr_t)a.xi, (const int32_t *)(uintptr_t)a.yi, x, y,
                (uint8_t *)(uintptr_t)a.dst.data + (size_t)y * a.dst.stride + 3 * (size_t)x);
}

static int plugin_color(void *ctx, const struct spw_gpu_color *a)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    if (a->op != SPW_GPU_LUT3 && a->src.data == a->dst.data) {
        snprintf(g->err, sizeof g->err, "colour op %d cannot run in place", (int)a->op);
        return -EINVAL;
    }
    const unsigned bx = (unsigned)((a->src.w * 3 + THREADS - 1) / THREADS);
    if (a->src.h > 0)
        k_color<<<dim3(bx, (unsigned)a->src.h), THREADS, 0, g->stream>>>(*a);
    CK(g, cudaGetLastError(), "colour kernel");
    return 0;
}

static int plugin_stats(void *ctx, const struct spw_gpu_image_stats *a)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    CK(g, cudaMemsetAsync((void *)(uintptr_t)a->hist, 0, sizeof(uint64_t) * 3 * 256, g->stream), "stats");
    CK(g, cudaMemsetAsync((void *)(uintptr_t)a->luma_sum, 0, sizeof(uint64_t), g->stream), "stats");
    const unsigned bx = (unsigned)((a->src.w + THREADS - 1) / THREADS);
    if (a->src.h > 0)
        k_stats<<<dim3(bx < 4 ? bx : 4, (unsigned)a->src.h), THREADS, 0, g->stream>>>(*a);
    CK(g, cudaGetLastError(), "stats kernel");
    return 0;
}

static int plugin_make_lut(void *ctx, const struct spw_gpu_make_lut *a)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    k_make_lut<<<1, 32, 0, g->stream>>>(*a);
    CK(g, cudaGetLastError(), "table kernel");
    return 0;
}

static int plugin_warp(void *ctx, const struct spw_gpu_warp *a)
{
    struct gpu_ctx *g = (struct gpu_ctx *)ctx;
    const unsigned bx = (unsigned)((a->dst.w + THREADS - 1) / THREADS);
    if (a->dst.h > 0 && a->dst.w > 0)
        k_warp<<<dim3(bx, (unsigned)a->dst.h), THREADS, 0, g->stream>>>(*a);
    CK(g, cudaGetLastError(), "warp kernel");
    return 0;
}

static const struct spw_gpu_plugin plugin = {
    SPW_GPU_ABI,     2 /* kDLCUDA */, plugin_version,  plugin_open,  plugin_close,    plugin_last_error,
    plugin_mem_info, plugin_reserve, plugin_upload,   plugin_download, plugin_copy, plugin_upload2d, plugin_sync,
    plugin_resample, plugin_sink,    plugin_color,    plugin_stats,    plugin_make_lut, plugin_warp,
};

extern "C" __attribute__((visibility("default"))) const struct spw_gpu_plugin *spw_gpu_plugin_v1(void)
{
    return &plugin;
}
