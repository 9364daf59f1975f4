/* tests/unit/check_gpu.c - pipeline/gpu_backend.c through the host emulation of the CUDA plugin
 * (tests/gpuemu/, the kernels' own per-pixel code): elements equal the CPU backend's byte for byte (resample,
 * crop, flips, normalize to f32 and f16, uint8 CHW, the policies, crops after the decode, random_erasing on
 * the output); an arena too small, a device that fails a micro-batch
 * and a crop that pads all end on the CPU with the same bytes; the arena never exceeds its budget; a
 * pipeline it cannot make is declined to the next backend; a missing plugin, a missing device and a budget
 * over the free memory are refused with their reasons. Device batches through the executor: the same batches
 * as host ones, skipped samples' gaps closed, no room or a failing device giving host batches with nothing
 * lost, every block back when the batches are released. Each test runs in its own process (the plugin is
 * loaded once per process). */
#include <check.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/check_run.h"
#include "lib/err.h"
#include "pipeline/backend.h"
#include "pipeline/executor.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/source.h"

#define FIX "tests/data/fixtures/"
#define MAXN 16

static char g_root[256];

static void use_emulation(void)
{
    char exe[PATH_MAX], lib[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    ck_assert(n > 0);
    exe[n] = 0;
    snprintf(lib, sizeof lib, "%s/../lib/libspillway-gpuemu.so", dirname(exe));
    ck_assert_msg(access(lib, R_OK) == 0, "%s: build it (make %s)", lib, "build/lib/libspillway-gpuemu.so");
    setenv("SPILLWAY_GPU_PLUGIN", lib, 1);
}

static void setup(void)
{
    snprintf(g_root, sizeof g_root, "/tmp/spw-gpu-XXXXXX");
    ck_assert(mkdtemp(g_root) != NULL);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/a' && for f in rgb420 rgb444 gray progressive cmyk; do "
             "cp " FIX "$f.jpg '%s/a/'$f.jpg; cp " FIX "$f.jpg '%s/a/'$f-2.jpg; done", g_root, g_root, g_root);
    ck_assert_int_eq(system(cmd), 0);
    use_emulation();
}

static void teardown(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_root);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", g_root);
}

/* A job over g_root with these ops and layout; everything the backends need. */
struct job {
    struct spw_pipeline_spec *spec;
    struct spw_source *src;
    struct spw_element_ctx ctx;
    struct spw_producer p;
};

static void job_open(struct job *j, const char *ops, const char *layout)
{
    char json[2048], err[512];
    snprintf(json, sizeof json, "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"seed\":3},"
             "\"ops\":[{\"op\":\"decode_jpeg\"},%s],\"batch\":{\"size\":4,\"layout\":\"%s\"}}", g_root, ops, layout);
    ck_assert_msg(spw_spec_parse_json(json, &j->spec, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(spw_source_open(&j->spec->source, &j->src, err, sizeof err), 0);
    ck_assert_int_eq(spw_element_ctx_init(&j->ctx, j->spec), 0);
    j->p = (struct spw_producer){.spec = j->spec, .src = j->src, .ctx = &j->ctx, .component = "test"};
}

static void job_close(struct job *j)
{
    spw_element_ctx_destroy(&j->ctx);
    spw_source_close(j->src);
    spw_spec_free(j->spec);
}

/* What a micro-batch delivered: each element's bytes as a batch would hold them. */
struct got {
    int done[MAXN], rc[MAXN];
    uint8_t *bytes[MAXN];
    size_t len[MAXN];
    enum spw_layout layout;
};

static const struct spw_element_dest *no_dest(void *opaque, int k) { return NULL; }

static void got_done(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct got *g = opaque;
    g->done[k]++;
    g->rc[k] = rc;
    if (rc == 0) {
        g->len[k] = spw_value_bytes(v);
        g->bytes[k] = malloc(g->len[k]);
        spw_value_copy_out(v, g->layout, g->bytes[k]);
    }
    spw_value_free(v);
}

static void got_free(struct got *g)
{
    for (int k = 0; k < MAXN; k++)
        free(g->bytes[k]);
}

static uint64_t g_epoch;       /* the epoch run_on runs */

/* Run samples [0, n) of epoch g_epoch as one micro-batch on table. */
static int run_on(const struct spw_backend *const *table, int nt, struct job *j, int n, struct got *g)
{
    int64_t samples[MAXN];
    for (int k = 0; k < n; k++)
        samples[k] = k;
    memset(g, 0, sizeof *g);
    g->layout = j->spec->batch.layout;
    const struct spw_microbatch mb = {.epoch = g_epoch, .cut = j->ctx.n_groups, .n = n, .samples = samples, .opaque = g,
                                      .dest = no_dest, .done = got_done};
    return spw_backend_run(table, nt, &j->p, &mb);
}

/* The GPU backend's elements equal the CPU backend's, every one delivered once. */
static void expect_same(struct spw_backend *gpu, struct job *j, int n)
{
    const struct spw_backend *const cpu_table[] = {&spw_backend_cpu};
    const struct spw_backend *const gpu_table[] = {gpu};
    struct got want, got;
    ck_assert_int_eq(run_on(cpu_table, 1, j, n, &want), 0);
    ck_assert_int_eq(run_on(gpu_table, 1, j, n, &got), 0);
    for (int k = 0; k < n; k++) {
        ck_assert_int_eq(got.done[k], 1);
        ck_assert_int_eq(got.rc[k], want.rc[k]);
        ck_assert_uint_eq(got.len[k], want.len[k]);
        ck_assert_msg(memcmp(got.bytes[k], want.bytes[k], got.len[k]) == 0, "sample %d differs", k);
    }
    got_free(&want);
    got_free(&got);
}

static struct spw_backend *open_gpu(const char *budget)
{
    struct spw_gpu_opts o = {.device = 0, .mem_budget = budget};
    struct spw_backend *b = NULL;
    char err[512];
    int rc = spw_gpu_backend_open(&o, &b, err, sizeof err);
    ck_assert_msg(rc == 0, "open: %s", err);
    return b;
}

static const char *const PIPELINES[][2] = {
    {"{\"op\":\"random_resized_crop\",\"size\":56},{\"op\":\"random_horizontal_flip\"},"
     "{\"op\":\"normalize\",\"mean\":[0.485,0.456,0.406],\"std\":[0.229,0.224,0.225]}", "HWC"},
    {"{\"op\":\"resize\",\"size\":[50,60]},{\"op\":\"center_crop\",\"size\":40},{\"op\":\"vertical_flip\"},"
     "{\"op\":\"to_tensor\",\"dtype\":\"float16\"}", "HWC"},
    {"{\"op\":\"resize\",\"size\":37,\"antialias\":false}", "CHW"},
    {"{\"op\":\"center_crop\",\"size\":[20,30]},{\"op\":\"horizontal_flip\"}", "HWC"},
    {"{\"op\":\"crop\",\"top\":3,\"left\":5,\"height\":17,\"width\":9}", "CHW"},
    /* ops after the decode group */
    {"{\"op\":\"random_resized_crop\",\"size\":64},{\"op\":\"random_horizontal_flip\"},"
     "{\"op\":\"rand_augment\",\"num_ops\":3,\"magnitude\":12,\"fill\":[9,99,199]},"
     "{\"op\":\"normalize\",\"mean\":[0.5,0.5,0.5],\"std\":[0.2,0.2,0.2]}", "HWC"},
    {"{\"op\":\"resize\",\"size\":[48,40]},{\"op\":\"trivial_augment_wide\"},{\"op\":\"to_tensor\"}", "HWC"},
    {"{\"op\":\"center_crop\",\"size\":56},{\"op\":\"auto_augment\"}", "CHW"},
    {"{\"op\":\"resize\",\"size\":[40,50]},{\"op\":\"adjust_brightness\",\"factor\":1.3},"
     "{\"op\":\"adjust_contrast\",\"factor\":0.6},{\"op\":\"adjust_saturation\",\"factor\":1.7},"
     "{\"op\":\"adjust_sharpness\",\"factor\":2.5},{\"op\":\"posterize\",\"bits\":3},"
     "{\"op\":\"solarize\",\"threshold\":100.5},{\"op\":\"equalize\"},{\"op\":\"autocontrast\"},"
     "{\"op\":\"invert\"}", "HWC"},
    {"{\"op\":\"random_resized_crop\",\"size\":[30,44]},{\"op\":\"rotate\",\"angle\":33,\"fill\":[10,20,30]},"
     "{\"op\":\"affine\",\"angle\":-10,\"translate\":[3,-2],\"scale\":1.1,\"shear\":[5,2]},"
     "{\"op\":\"vertical_flip\"},{\"op\":\"random_vertical_flip\"},{\"op\":\"rotate\",\"angle\":180}", "HWC"},
    {"{\"op\":\"center_crop\",\"size\":32},{\"op\":\"rotate\",\"angle\":90},{\"op\":\"rotate\",\"angle\":-90},"
     "{\"op\":\"affine\",\"scale\":0.7}", "HWC"},
    {"{\"op\":\"random_resized_crop\",\"size\":40},{\"op\":\"color_jitter\",\"brightness\":0.4,\"contrast\":0.4,"
     "\"saturation\":0.4,\"hue\":0.1},{\"op\":\"adjust_hue\",\"factor\":-0.3},{\"op\":\"to_tensor\"}", "HWC"},
    /* crops after the decode group: padding with a fill, pad_if_needed growing the image, then others */
    {"{\"op\":\"resize\",\"size\":[36,40]},{\"op\":\"random_crop\",\"size\":32,\"padding\":4,"
     "\"fill\":[7,8,9]},{\"op\":\"random_horizontal_flip\"},{\"op\":\"normalize\",\"mean\":[0.5,0.4,0.3],"
     "\"std\":[0.2,0.3,0.25]}", "HWC"},
    {"{\"op\":\"resize\",\"size\":[20,24]},{\"op\":\"invert\"},{\"op\":\"random_crop\",\"size\":[30,26],"
     "\"pad_if_needed\":true},{\"op\":\"center_crop\",\"size\":[22,34]},{\"op\":\"crop\",\"top\":-2,"
     "\"left\":3,\"height\":15,\"width\":40},{\"op\":\"rotate\",\"angle\":90}", "CHW"},
    /* bilinear warps (Pillow's double arithmetic), beside a nearest one and an exact transpose */
    {"{\"op\":\"random_resized_crop\",\"size\":[34,46]},{\"op\":\"rotate\",\"angle\":27.5,"
     "\"interpolation\":\"bilinear\",\"fill\":[200,100,50]},{\"op\":\"affine\",\"angle\":-12,"
     "\"translate\":[4,-3],\"scale\":0.9,\"shear\":[8,-3],\"interpolation\":\"bilinear\"},"
     "{\"op\":\"rotate\",\"angle\":180,\"interpolation\":\"bilinear\"},{\"op\":\"affine\",\"angle\":5}", "CHW"},
    /* random_erasing on the output tensor: after a fused normalize, and after an augment group's */
    {"{\"op\":\"random_resized_crop\",\"size\":40},{\"op\":\"normalize\",\"mean\":[0.5,0.4,0.3],"
     "\"std\":[0.2,0.3,0.25]},{\"op\":\"random_erasing\",\"p\":0.8,\"value\":[0.1,0.2,0.3]}", "HWC"},
    {"{\"op\":\"random_resized_crop\",\"size\":[36,28]},{\"op\":\"rand_augment\"},{\"op\":\"to_tensor\","
     "\"dtype\":\"float16\"},{\"op\":\"random_erasing\",\"p\":0.9,\"value\":\"random\"},"
     "{\"op\":\"random_erasing\",\"p\":0.7,\"scale\":[0.1,0.2]}", "HWC"},
};
#define N_PIPELINES ((int)(sizeof PIPELINES / sizeof PIPELINES[0]))

START_TEST(test_gpu_equals_cpu)
{
    struct spw_backend *gpu = open_gpu("0.5");
    ck_assert_ptr_nonnull(strstr(spw_gpu_backend_describe(gpu), "arena 512 MiB of 1024 MiB free"));
    for (int i = 0; i < N_PIPELINES; i++) {
        struct job j;
        job_open(&j, PIPELINES[i][0], PIPELINES[i][1]);
        char why[256];
        ck_assert_msg(spw_gpu_can_make(&j.ctx, j.ctx.n_groups, why, sizeof why), "pipeline %d: %s", i, why);
        for (g_epoch = 0; g_epoch < 4; g_epoch++)
            expect_same(gpu, &j, 10);
        g_epoch = 0;
        job_close(&j);
    }
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_eq(st.elements, N_PIPELINES * 40);
    ck_assert_int_eq(st.cpu_elements, 0);
    ck_assert_uint_gt(st.arena_peak, 0);
    ck_assert_uint_le(st.arena_peak, st.arena_bytes);
    spw_gpu_backend_close(gpu);
}
END_TEST

/* An arena of 64 KiB holds a small crop but not a resample of a whole photo: those go to the CPU (from the
 * region already decoded, then the other groups: RandAugment's pipeline too). */
START_TEST(test_gpu_arena_too_small_goes_to_cpu)
{
    struct spw_backend *gpu = open_gpu("64Ki");
    struct spw_gpu_stats st = {0};
    for (int i = 0; i <= 5; i += 5) {
        struct job j;
        job_open(&j, PIPELINES[i][0], PIPELINES[i][1]);
        const int64_t before = st.cpu_elements;
        expect_same(gpu, &j, 10);
        spw_gpu_backend_stats(gpu, &st);
        ck_assert_int_gt(st.cpu_elements, before);
        job_close(&j);
    }
    ck_assert_int_eq(st.elements + st.cpu_elements, 20);
    ck_assert_uint_le(st.arena_peak, (size_t)64 << 10);
    spw_gpu_backend_close(gpu);
}
END_TEST

START_TEST(test_gpu_device_failure_goes_to_cpu)
{
    setenv("SPW_GPUEMU_FAIL", "sync", 1);
    struct spw_backend *gpu = open_gpu(NULL);
    struct job j;
    job_open(&j, PIPELINES[1][0], PIPELINES[1][1]);
    expect_same(gpu, &j, 10);
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_eq(st.cpu_elements, 10);
    ck_assert_int_eq(st.elements, 0);
    ck_assert_int_eq(st.device_errors, 1);
    /* CUDA errors stick to a context: from now on it declines, and the next backend makes the elements */
    struct got g;
    const struct spw_backend *const table[] = {gpu, &spw_backend_cpu};
    ck_assert_int_eq(run_on(table, 2, &j, 4, &g), 0);
    ck_assert(g.done[0] == 1 && g.rc[0] == 0);
    got_free(&g);
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_eq(st.declined, 1);
    ck_assert_int_eq(st.device_errors, 1);
    job_close(&j);
    spw_gpu_backend_close(gpu);
}
END_TEST

/* A center crop bigger than the image pads: it runs op by op on the CPU, with the same bytes. */
START_TEST(test_gpu_padding_crop_goes_to_cpu)
{
    struct spw_backend *gpu = open_gpu(NULL);
    struct job j;
    job_open(&j, "{\"op\":\"center_crop\",\"size\":4000},{\"op\":\"to_tensor\"}", "HWC");
    expect_same(gpu, &j, 3);
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_eq(st.cpu_elements, 3);
    job_close(&j);
    spw_gpu_backend_close(gpu);
}
END_TEST

/* A pipeline with ops it has no kernels for is declined; the table's next row (the CPU) makes it. */
START_TEST(test_gpu_declines_what_it_cannot_make)
{
    struct spw_backend *gpu = open_gpu(NULL);
    struct job j;
    job_open(&j, "{\"op\":\"random_resized_crop\",\"size\":32},{\"op\":\"invert\"},{\"op\":\"resize\",\"size\":24}",
             "HWC");
    char why[256];
    ck_assert(!spw_gpu_can_make(&j.ctx, j.ctx.n_groups, why, sizeof why));
    ck_assert_msg(strstr(why, "ops[3] resize has no GPU kernel") != NULL, "%s", why);
    struct got g;
    const struct spw_backend *const only_gpu[] = {gpu};
    ck_assert_int_eq(run_on(only_gpu, 1, &j, 4, &g), -ENOTSUP);
    ck_assert_int_eq(g.done[0], 0);
    const struct spw_backend *const table[] = {gpu, &spw_backend_cpu};
    ck_assert_int_eq(run_on(table, 2, &j, 4, &g), 0);
    for (int k = 0; k < 4; k++)
        ck_assert(g.done[k] == 1 && g.rc[k] == 0);
    got_free(&g);
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_eq(st.declined, 2);
    job_close(&j);
    spw_gpu_backend_close(gpu);
}
END_TEST

START_TEST(test_gpu_open_refusals)
{
    struct spw_gpu_opts o = {.device = 0, .mem_budget = "2Gi"};
    struct spw_backend *b = NULL;
    char err[512];
    ck_assert_int_eq(spw_gpu_backend_open(&o, &b, err, sizeof err), SPW_ESPEC);
    ck_assert_msg(strstr(err, "more than the 1024 MiB free") != NULL, "%s", err);
    o.mem_budget = NULL;
    o.device = 3;
    ck_assert_int_eq(spw_gpu_backend_open(&o, &b, err, sizeof err), -ENODEV);
    ck_assert_msg(strstr(err, "no CUDA device 3") != NULL, "%s", err);
}
END_TEST

START_TEST(test_gpu_missing_plugin)
{
    setenv("SPILLWAY_GPU_PLUGIN", "/nonexistent/libspillway-gpu.so", 1);
    struct spw_gpu_opts o = {.device = 0};
    struct spw_backend *b = NULL;
    char err[512];
    ck_assert_int_eq(spw_gpu_backend_open(&o, &b, err, sizeof err), -ENOENT);
    ck_assert_msg(strstr(err, "no GPU plugin") && strstr(err, "/nonexistent/libspillway-gpu.so"), "%s", err);
}
END_TEST

START_TEST(test_gpu_no_device)
{
    setenv("SPW_GPUEMU_FAIL", "open", 1);
    struct spw_gpu_opts o = {.device = 0};
    struct spw_backend *b = NULL;
    char err[512];
    ck_assert_int_eq(spw_gpu_backend_open(&o, &b, err, sizeof err), -ENODEV);
    ck_assert_msg(strstr(err, "no CUDA device 0") != NULL, "%s", err);
}
END_TEST

/* ---- device batches, through the executor ---- */

#define MAXB 64

/* Every batch of a run: its data (read in place: the emulation's device addresses are host memory), labels. */
struct run {
    int batches, on_device;
    int n[MAXB];
    bool dev[MAXB];
    size_t len[MAXB];
    uint8_t *data[MAXB];
    int64_t labels[MAXB][4];
};

static void run_executor(struct job *j, const struct spw_backend *gpu, bool device_batches, struct run *r)
{
    memset(r, 0, sizeof *r);
    const struct spw_executor_opts o = {.threads = 1, .gpu = gpu, .device_batches = device_batches};
    struct spw_executor *ex;
    char err[512];
    ck_assert_msg(spw_executor_create(j->spec, j->src, &o, &ex, err, sizeof err) == 0, "%s", err);
    struct spw_batch *b;
    int rc;
    while ((rc = spw_executor_next(ex, &b)) == 0) {
        ck_assert_int_lt(r->batches, MAXB);
        const int i = r->batches++;
        ck_assert_int_eq(b->device_type, 1);            /* kDLCPU: the emulation */
        r->dev[i] = b->device_block != 0;
        r->on_device += r->dev[i];
        r->n[i] = b->n;
        r->len[i] = b->tensors[0].nbytes;
        r->data[i] = malloc(r->len[i]);
        memcpy(r->data[i], b->tensors[0].data, r->len[i]);
        memcpy(r->labels[i], b->tensors[1].data, sizeof(int64_t) * (size_t)b->n);
        spw_executor_release(ex, b);
    }
    ck_assert_int_eq(rc, SPW_ECLOSED);
    spw_executor_destroy(ex);
}

static void expect_same_run(const struct run *want, const struct run *got)
{
    ck_assert_int_eq(got->batches, want->batches);
    for (int i = 0; i < want->batches; i++) {
        ck_assert_int_eq(got->n[i], want->n[i]);
        ck_assert_uint_eq(got->len[i], want->len[i]);
        ck_assert_msg(memcmp(got->data[i], want->data[i], want->len[i]) == 0, "batch %d differs", i);
        ck_assert(memcmp(got->labels[i], want->labels[i], sizeof(int64_t) * (size_t)want->n[i]) == 0);
    }
}

static void run_free(struct run *r)
{
    for (int i = 0; i < r->batches; i++)
        free(r->data[i]);
}

/* 3 epochs of 10 photos (and a file that is not one: on_error skip) in batches of 4. */
static void batches_job(struct job *j, const char *ops, bool with_bad)
{
    char path[512], json[2048], err[512];
    if (with_bad) {
        snprintf(path, sizeof path, "%s/a/zz-not-a-photo.jpg", g_root);
        FILE *f = fopen(path, "w");
        ck_assert_ptr_nonnull(f);
        fputs("\xff\xd8 this is not a JPEG", f);
        fclose(f);
    }
    snprintf(json, sizeof json, "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"seed\":5,\"epochs\":3,"
             "\"shuffle\":true},\"ops\":[{\"op\":\"decode_jpeg\"},%s],\"batch\":{\"size\":4},"
             "\"on_error\":\"skip\"}", g_root, ops);
    ck_assert_msg(spw_spec_parse_json(json, &j->spec, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(spw_source_open(&j->spec->source, &j->src, err, sizeof err), 0);
    ck_assert_int_eq(spw_element_ctx_init(&j->ctx, j->spec), 0);
}

/* Device batches hold what host batches hold, gaps of skipped samples closed; every block comes back. */
START_TEST(test_gpu_device_batches_equal_host_ones)
{
    struct spw_backend *gpu = open_gpu(NULL);
    for (int i = 0; i < 3; i++) {
        static const int pick[] = {0, 5, 4};
        struct job j;
        batches_job(&j, PIPELINES[pick[i]][0], i == 1);
        struct run want, got;
        run_executor(&j, NULL, false, &want);
        run_executor(&j, gpu, true, &got);
        expect_same_run(&want, &got);
        ck_assert_int_eq(got.on_device, got.batches);
        if (i == 1) {                       /* the file that is not a photo left a gap in 3 batches */
            int short_ones = 0;
            for (int b = 0; b < want.batches; b++)
                short_ones += want.n[b] < 4 && b % 3 != 2;
            ck_assert_int_eq(short_ones, 3);
        }
        run_free(&want);
        run_free(&got);
        job_close(&j);
    }
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_gt(st.elements, 0);
    ck_assert_uint_eq(st.arena_used, 0);
    spw_gpu_backend_close(gpu);
}
END_TEST

/* An arena with room for elements but not for a batch of 4 x 19200 bytes: host batches, the same ones
 * (an epoch's last batch, of 2, may fit). */
START_TEST(test_gpu_device_batches_without_room_are_host_ones)
{
    struct spw_backend *gpu = open_gpu("64Ki");
    struct job j;
    batches_job(&j, "{\"op\":\"center_crop\",\"size\":40},{\"op\":\"to_tensor\"}", false);
    struct run want, got;
    run_executor(&j, NULL, false, &want);
    run_executor(&j, gpu, true, &got);
    expect_same_run(&want, &got);
    for (int i = 0; i < got.batches; i++)
        ck_assert_msg(!got.dev[i] || got.n[i] < 4, "batch %d of %d elements is on the device", i, got.n[i]);
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_gt(st.elements, 0);
    ck_assert_uint_le(st.arena_peak, (size_t)64 << 10);
    ck_assert_uint_eq(st.arena_used, 0);
    run_free(&want);
    run_free(&got);
    job_close(&j);
    spw_gpu_backend_close(gpu);
}
END_TEST

/* The device fails after a few micro-batches: the batches it had rows of come in host memory with those
 * rows made again on the CPU, and so does every later one; nothing lost, nothing different. */
START_TEST(test_gpu_device_batches_survive_a_failing_device)
{
    struct job j;
    batches_job(&j, PIPELINES[0][0], true);
    struct run want, got;
    run_executor(&j, NULL, false, &want);
    setenv("SPW_GPUEMU_FAIL", "sync@3", 1);
    struct spw_backend *gpu = open_gpu(NULL);
    run_executor(&j, gpu, true, &got);
    expect_same_run(&want, &got);
    ck_assert_int_lt(got.on_device, got.batches);
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    ck_assert_int_ge(st.device_errors, 1);
    ck_assert_uint_eq(st.arena_used, 0);
    run_free(&want);
    run_free(&got);
    job_close(&j);
    spw_gpu_backend_close(gpu);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu");
    TCase *tc = tcase_create("gpu");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_gpu_equals_cpu);
    tcase_add_test(tc, test_gpu_arena_too_small_goes_to_cpu);
    tcase_add_test(tc, test_gpu_device_failure_goes_to_cpu);
    tcase_add_test(tc, test_gpu_padding_crop_goes_to_cpu);
    tcase_add_test(tc, test_gpu_declines_what_it_cannot_make);
    tcase_add_test(tc, test_gpu_open_refusals);
    tcase_add_test(tc, test_gpu_missing_plugin);
    tcase_add_test(tc, test_gpu_no_device);
    tcase_add_test(tc, test_gpu_device_batches_equal_host_ones);
    tcase_add_test(tc, test_gpu_device_batches_without_room_are_host_ones);
    tcase_add_test(tc, test_gpu_device_batches_survive_a_failing_device);
    suite_add_tcase(s, tc);
    return spw_check_run(s);
}
