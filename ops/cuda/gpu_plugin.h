/* ops/cuda/gpu_plugin.h - the C ABI between Spillway and its CUDA plugin, libspillway-gpu.so (built by nvcc
 * with a static cudart and loaded with dlopen; nothing else links CUDA). The plugin is thin: one device,
 * one low-priority stream, one memory reservation, copies, and kernels over device addresses. All policy
 * (the arena's accounting, what runs where, random parameters) stays in C on the host, so it is tested
 * without a device. Every call returns 0 or a negative code with a message in the context's last error.
 * A context is used by one thread at a time. */
#ifndef SPW_OPS_CUDA_GPU_PLUGIN_H
#define SPW_OPS_CUDA_GPU_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPW_GPU_ABI 2
#define SPW_GPU_ENTRY "spw_gpu_plugin_v1"  /* const struct spw_gpu_plugin *spw_gpu_plugin_v1(void) */

typedef uint64_t spw_dptr;      /* a device address */

/* Separable resampling of one uint8 HWC image (the coefficients of ops/resample.c's plan: per output
 * column / row its first source index and tap count, then ksize 22-bit fixed-point weights). Pass 1 reads
 * rows [row_first, row_first + row_count) of src and writes tmp (row_count x out_w x 3); pass 2 writes
 * dst (out_h x out_w x 3). need_h / need_v false: that pass is a copy. */
struct spw_gpu_resample {
    spw_dptr src;               /* the source region's pixel (src_x0, src_y0) of the plan */
    size_t src_stride;
    int src_x0, src_y0;         /* source coordinates of the region's first pixel */
    int row_first, row_count;   /* source rows pass 1 produces */
    int out_w, out_h;
    int need_h, need_v;
    int ksize_h, ksize_v;
    spw_dptr bounds_h, kk_h;    /* int32 (first, count) x out_w; int32 weights x out_w * ksize_h */
    spw_dptr bounds_v, kk_v;    /* the same per output row */
    int src_x_first;            /* the plan's src_x0: bounds_h are in source columns from here */
    spw_dptr tmp;               /* row_count x out_w x 3 */
    spw_dptr dst;               /* out_h x out_w x 3, HWC */
};

/* The output step: a uint8 HWC image through flips into uint8 HWC / CHW, or float32 / float16 CHW through
 * a per-channel 256-entry table (normalize / to_tensor), as ops/sink.c writes rows. */
enum spw_gpu_out { SPW_GPU_OUT_U8_HWC = 0, SPW_GPU_OUT_F32_CHW = 1, SPW_GPU_OUT_F16_CHW = 2, SPW_GPU_OUT_U8_CHW = 3 };

struct spw_gpu_sink {
    spw_dptr src;               /* w x h x 3 uint8, rows of src_stride bytes */
    size_t src_stride;
    int w, h;
    int hflip, vflip;
    enum spw_gpu_out kind;
    spw_dptr lut;               /* float kinds: float[3][256] (f32) or uint16[3][256] (f16) */
    spw_dptr dst;
};

/* A uint8 HWC RGB image in device memory. */
struct spw_gpu_image {
    spw_dptr data;
    size_t stride;
    int w, h;
};

/* Colour ops of one image, src to dst (the same image for LUT3; distinct for SHARPNESS). */
enum spw_gpu_color_op {
    SPW_GPU_LUT3 = 0,           /* dst = lut[c][src]: lut is uint8[3][256] in device memory */
    SPW_GPU_SATURATION = 1,     /* the blend of each pixel with its luma (alpha) */
    SPW_GPU_SHARPNESS = 2,      /* the blend with the 3x3 smoothed image inside a 1-pixel border (alpha) */
    SPW_GPU_HUE = 3,            /* through HSV with the hue moved by hue_shift (adjust_hue) */
};

struct spw_gpu_color {
    struct spw_gpu_image src, dst;
    enum spw_gpu_color_op op;
    float alpha;
    int hue_shift;
    spw_dptr lut;
};

/* Statistics of one image: per-channel histograms (uint64[3][256]) and the sum of its luma (uint64), both
 * zeroed first; then a table (uint8[3][256]) made from them on the device. */
struct spw_gpu_image_stats {
    struct spw_gpu_image src;
    spw_dptr hist, luma_sum;
};

enum spw_gpu_lut_kind { SPW_GPU_LUT_CONTRAST = 0, SPW_GPU_LUT_EQUALIZE = 1, SPW_GPU_LUT_AUTOCONTRAST = 2 };

struct spw_gpu_make_lut {
    enum spw_gpu_lut_kind kind;
    float alpha;                /* contrast: the blend with the mean luma */
    spw_dptr hist, luma_sum;
    uint64_t n;                 /* pixels */
    spw_dptr lut;
};

/* A nearest warp of src into dst, as ops/geometry.h's struct spw_warp_plan says; dst's size is the output's
 * (a crop: a FIXED warp by whole pixels into a smaller or larger image, ink outside the source). */
enum spw_gpu_warp_kind {
    SPW_GPU_WARP_TRANSPOSE = 0, SPW_GPU_WARP_SCALE = 1, SPW_GPU_WARP_FIXED = 2,
    SPW_GPU_WARP_BILINEAR = 3,  /* Pillow's bilinear sample of the inverse map m (ops/warp_px.h) */
};

struct spw_gpu_warp {
    struct spw_gpu_image src, dst;
    enum spw_gpu_warp_kind kind;
    int transpose;              /* 0, 90, 180, 270 */
    int64_t fx[6];              /* FIXED: a0, a1, a2 (at pixel 0, 0), a3, a4, a5 in 16.16 */
    spw_dptr xi, yi;            /* SCALE: int32 source column per output column, row per output row; -1 out */
    double m[6];                /* BILINEAR: the inverse matrix */
    uint8_t ink[3];
};

struct spw_gpu_plugin {
    int abi;                                    /* SPW_GPU_ABI */
    int dlpack_device_type;                     /* what its addresses are to other libraries, as DLPack's
                                                   DLDeviceType: 2 (kDLCUDA); a host emulation says 1 (kDLCPU) */
    const char *(*version)(void);               /* "cuda RUNTIME_VERSION, built ..." */
    /* The device: checks the driver, makes a low-priority stream. Returns -ENODEV (no device or driver)
     * or -EIO, with the reason in err. */
    int (*open)(int device, void **ctx, char *err, size_t errlen);
    void (*close)(void *ctx);
    const char *(*last_error)(void *ctx);
    int (*mem_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);
    /* The arena: one allocation of bytes, made once (-ENOMEM when the device cannot give it). */
    int (*reserve)(void *ctx, size_t bytes, spw_dptr *base);
    /* Copies on the context's stream; host memory is the caller's until sync returns. */
    int (*upload)(void *ctx, spw_dptr dst, const void *src, size_t n);
    int (*download)(void *ctx, void *dst, spw_dptr src, size_t n);
    int (*copy)(void *ctx, spw_dptr dst, spw_dptr src, size_t n);    /* device to device */
    /* rows of width bytes from host src (spitch apart) to dst (dpitch apart) */
    int (*upload2d)(void *ctx, spw_dptr dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                    size_t rows);
    int (*sync)(void *ctx);
    /* Kernels, queued on the stream. */
    int (*resample)(void *ctx, const struct spw_gpu_resample *a);
    int (*sink)(void *ctx, const struct spw_gpu_sink *a);
    int (*color)(void *ctx, const struct spw_gpu_color *a);
    int (*stats)(void *ctx, const struct spw_gpu_image_stats *a);
    int (*make_lut)(void *ctx, const struct spw_gpu_make_lut *a);
    int (*warp)(void *ctx, const struct spw_gpu_warp *a);
};

typedef const struct spw_gpu_plugin *(*spw_gpu_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif
