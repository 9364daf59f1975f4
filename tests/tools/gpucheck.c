/* tests/tools/gpucheck.c - the device half of scripts/gpu-check.sh: for each pipeline, the GPU backend's
 * elements against the CPU backend's (bytes equal, largest and mean difference), then throughput over the
 * same images (elements/s of the GPU backend on one host thread, the CPU backend on 1 and on N threads, and
 * N CPU threads beside one GPU thread), and the device memory it used against its budget (cudaMemGetInfo
 * sampled before each micro-batch), and the in-process executor's batches handed over on the device (DLPack
 * device batches) vs in host memory. One JSON object per line on stdout. Runs without a device too (the
 * emulated plugin), which is how it is tested here. With GPUCHECK_STRESS=1 it only runs the RandAugment
 * pipeline on the GPU backend for SECONDS (the load beside a training loop in the slowdown measurement).
 *   gpucheck DATA_DIR [SECONDS_PER_RUN [THREADS [BUDGET]]] */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "pipeline/backend.h"
#include "pipeline/executor.h"
#include "pipeline/gpu_backend.h"
#include "pipeline/source.h"

#define MB 16
#define CHECK_SAMPLES 64

static const char *const PIPELINES[][2] = {
    {"randaugment", "{\"op\":\"random_resized_crop\",\"size\":224},{\"op\":\"random_horizontal_flip\"},"
                    "{\"op\":\"rand_augment\",\"num_ops\":2,\"magnitude\":9},"
                    "{\"op\":\"normalize\",\"mean\":[0.485,0.456,0.406],\"std\":[0.229,0.224,0.225]}"},
    {"train", "{\"op\":\"random_resized_crop\",\"size\":224},{\"op\":\"random_horizontal_flip\"},"
              "{\"op\":\"normalize\",\"mean\":[0.485,0.456,0.406],\"std\":[0.229,0.224,0.225]}"},
    {"eval", "{\"op\":\"resize\",\"size\":256},{\"op\":\"center_crop\",\"size\":224},{\"op\":\"to_tensor\"}"},
    {"autoaugment", "{\"op\":\"random_resized_crop\",\"size\":224},{\"op\":\"auto_augment\"},{\"op\":\"to_tensor\"}"},
    {"trivialaugment", "{\"op\":\"random_resized_crop\",\"size\":224},{\"op\":\"trivial_augment_wide\"},"
                       "{\"op\":\"to_tensor\",\"dtype\":\"float16\"}"},
};

struct job {
    struct spw_pipeline_spec *spec;
    struct spw_source *src;
    struct spw_element_ctx ctx;
    struct spw_producer p;
};

static int job_open(struct job *j, const char *dir, const char *ops)
{
    char json[2048], err[512];
    snprintf(json, sizeof json, "{\"source\":{\"format\":\"image_folder\",\"path\":\"%s\",\"seed\":7,\"epochs\":0},"
             "\"ops\":[{\"op\":\"decode_jpeg\"},%s],\"batch\":{\"size\":32}}", dir, ops);
    if (spw_spec_parse_json(json, &j->spec, err, sizeof err) || spw_source_open(&j->spec->source, &j->src, err,
                                                                                  sizeof err)) {
        fprintf(stderr, "gpucheck: %s\n", err);
        return -1;
    }
    if (spw_element_ctx_init(&j->ctx, j->spec))
        return -1;
    j->p = (struct spw_producer){.spec = j->spec, .src = j->src, .ctx = &j->ctx, .component = "gpucheck"};
    return 0;
}

static void job_close(struct job *j)
{
    spw_element_ctx_destroy(&j->ctx);
    spw_source_close(j->src);
    spw_spec_free(j->spec);
}

/* ---- exactness ---- */

struct kept {
    int rc[MB];
    uint8_t *bytes[MB];
    size_t len[MB];
    enum spw_dtype dt[MB];
};

static void keep(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct kept *g = opaque;
    g->rc[k] = rc;
    if (rc == 0) {
        enum spw_dtype dt;
        int nd;
        int64_t shape[8];
        spw_value_out_shape(v, SPW_LAYOUT_HWC, &dt, &nd, shape);
        g->dt[k] = dt;
        g->len[k] = spw_value_bytes(v);
        g->bytes[k] = malloc(g->len[k]);
        spw_value_copy_out(v, SPW_LAYOUT_HWC, g->bytes[k]);
    }
    spw_value_free(v);
}

static double value_at(const uint8_t *b, enum spw_dtype dt, size_t i)
{
    if (dt == SPW_DTYPE_F32)
        return ((const float *)(const void *)b)[i];
    if (dt == SPW_DTYPE_F16) {
        const uint16_t h = ((const uint16_t *)(const void *)b)[i];
        const int e = (h >> 10) & 31, m = h & 1023;
        const double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
        return h >> 15 ? -v : v;
    }
    return b[i];
}

static void check_exact(const char *name, const struct spw_backend *gpu, struct job *j)
{
    const struct spw_backend *const cpu_t[] = {&spw_backend_cpu}, *const gpu_t[] = {gpu};
    int64_t elements = 0, equal = 0, values = 0;
    double max_diff = 0, sum_diff = 0;
    for (int64_t s0 = 0; s0 < CHECK_SAMPLES && s0 < j->src->n; s0 += MB) {
        int64_t samples[MB];
        const int n = (int)(j->src->n - s0 < MB ? j->src->n - s0 : MB);
        for (int k = 0; k < n; k++)
            samples[k] = s0 + k;
        struct kept a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        struct spw_microbatch mb = {.epoch = (uint64_t)(s0 / MB), .cut = j->ctx.n_groups, .n = n, .samples = samples,
                                    .done = keep};
        mb.opaque = &a;
        spw_backend_run(cpu_t, 1, &j->p, &mb);
        mb.opaque = &b;
        spw_backend_run(gpu_t, 1, &j->p, &mb);
        for (int k = 0; k < n; k++) {
            if (a.rc[k] || b.rc[k] || a.len[k] != b.len[k]) {
                free(a.bytes[k]);
                free(b.bytes[k]);
                continue;
            }
            elements++;
            equal += memcmp(a.bytes[k], b.bytes[k], a.len[k]) == 0;
            const size_t nv = a.len[k] / spw_dtype_size(a.dt[k]);
            for (size_t i = 0; i < nv; i++) {
                const double d = fabs(value_at(a.bytes[k], a.dt[k], i) - value_at(b.bytes[k], b.dt[k], i));
                max_diff = d > max_diff ? d : max_diff;
                sum_diff += d;
            }
            values += (int64_t)nv;
            free(a.bytes[k]);
            free(b.bytes[k]);
        }
    }
    printf("{\"check\":\"exact\",\"pipeline\":\"%s\",\"elements\":%lld,\"byte_equal\":%lld,\"max_abs_diff\":%g,"
           "\"mean_abs_diff\":%g}\n", name, (long long)elements, (long long)equal, max_diff,
           values ? sum_diff / (double)values : 0.0);
}

/* ---- throughput ---- */

struct run {
    struct job *j;
    const struct spw_backend *const *table;
    int n_table;
    int64_t *next;              /* atomic: the next micro-batch */
    int64_t deadline_ns;
    int64_t elements;
    const struct spw_backend *gpu;      /* sample the device's free memory before each micro-batch */
    size_t min_free;
};

static void count(void *opaque, int k, int rc, struct spw_value *v, const char *err)
{
    struct run *r = opaque;
    r->elements += rc == 0;
    spw_value_free(v);
}

static void *run_main(void *arg)
{
    struct run *r = arg;
    while (spw_now_ns() < r->deadline_ns) {
        const int64_t b = __atomic_fetch_add(r->next, 1, __ATOMIC_RELAXED);
        int64_t samples[MB];
        for (int k = 0; k < MB; k++)
            samples[k] = (b * MB + k) % r->j->src->n;
        if (r->gpu) {
            size_t f, t;
            if (spw_gpu_backend_mem_info(r->gpu, &f, &t) == 0 && f < r->min_free)
                r->min_free = f;
        }
        const struct spw_microbatch mb = {.epoch = (uint64_t)(b * MB / r->j->src->n), .cut = r->j->ctx.n_groups,
                                          .n = MB, .samples = samples, .opaque = r, .done = count};
        spw_backend_run(r->table, r->n_table, &r->j->p, &mb);
    }
    return NULL;
}

/* cpu_threads CPU threads and (gpu) one GPU thread for seconds: elements/s. */
static double throughput(struct job *j, const struct spw_backend *gpu, int cpu_threads, double seconds,
                         size_t *min_free)
{
    static const struct spw_backend *const cpu_t[] = {&spw_backend_cpu};
    const struct spw_backend *const gpu_t[] = {gpu, &spw_backend_cpu};
    struct run runs[65];
    pthread_t t[65];
    int64_t next = 0;
    const int n = cpu_threads + (gpu != NULL);
    const int64_t t0 = spw_now_ns();
    for (int i = 0; i < n; i++) {
        const bool on_gpu = gpu && i == cpu_threads;
        runs[i] = (struct run){.j = j, .table = on_gpu ? gpu_t : cpu_t, .n_table = on_gpu ? 2 : 1, .next = &next,
                               .deadline_ns = t0 + (int64_t)(seconds * 1e9), .gpu = on_gpu ? gpu : NULL,
                               .min_free = (size_t)-1};
        pthread_create(&t[i], NULL, run_main, &runs[i]);
    }
    int64_t elements = 0;
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        elements += runs[i].elements;
        if (min_free && runs[i].gpu && runs[i].min_free < *min_free)
            *min_free = runs[i].min_free;
    }
    return (double)elements / ((double)(spw_now_ns() - t0) / 1e9);
}

/* The in-process executor (threads CPU threads and the GPU thread) for seconds: elements/s of its batches,
 * handed over on the device or in host memory; *on_device counts the device ones. */
static double executor_rate(struct job *j, const struct spw_backend *gpu, int threads, bool device_batches,
                            double seconds, int64_t *on_device)
{
    const struct spw_executor_opts o = {.threads = threads, .gpu = gpu, .device_batches = device_batches};
    struct spw_executor *ex;
    char err[512];
    if (spw_executor_create(j->spec, j->src, &o, &ex, err, sizeof err) != 0) {
        fprintf(stderr, "gpucheck: %s\n", err);
        return 0;
    }
    const int64_t t0 = spw_now_ns(), end = t0 + (int64_t)(seconds * 1e9);
    int64_t elements = 0;
    struct spw_batch *b;
    *on_device = 0;
    while (spw_now_ns() < end && spw_executor_next(ex, &b) == 0) {
        elements += b->n;
        *on_device += b->device_block != 0;
        spw_executor_release(ex, b);
    }
    const double rate = (double)elements / ((double)(spw_now_ns() - t0) / 1e9);
    spw_executor_destroy(ex);
    return rate;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: gpucheck DATA_DIR [SECONDS_PER_RUN [THREADS [BUDGET]]]\n");
        return 2;
    }
    const double seconds = argc > 2 ? atof(argv[2]) : 10;
    const int threads = argc > 3 ? atoi(argv[3]) : 8;
    struct spw_gpu_opts o = {.device = 0, .mem_budget = argc > 4 ? argv[4] : NULL};
    struct spw_backend *gpu;
    char err[512];
    size_t free1 = 0, total = 0;
    if (spw_gpu_backend_open(&o, &gpu, err, sizeof err) != 0) {
        printf("{\"check\":\"open\",\"ok\":false,\"error\":\"%s\"}\n", err);
        return 1;
    }
    spw_gpu_backend_mem_info(gpu, &free1, &total);
    struct spw_gpu_stats st;
    spw_gpu_backend_stats(gpu, &st);
    printf("{\"check\":\"open\",\"ok\":true,\"describe\":\"%s\",\"arena_bytes\":%zu,\"free_after_open\":%zu,"
           "\"total\":%zu}\n", spw_gpu_backend_describe(gpu), st.arena_bytes, free1, total);
    const char *stress = getenv("GPUCHECK_STRESS");
    if (stress && *stress == '1') {
        struct job j;
        if (job_open(&j, argv[1], PIPELINES[0][1]) != 0)
            return 1;
        printf("{\"check\":\"stress\",\"pipeline\":\"%s\",\"gpu_1\":%.1f}\n", PIPELINES[0][0],
               throughput(&j, gpu, 0, seconds, NULL));
        job_close(&j);
        spw_gpu_backend_close(gpu);
        return 0;
    }
    for (size_t i = 0; i < sizeof PIPELINES / sizeof PIPELINES[0]; i++) {
        struct job j;
        if (job_open(&j, argv[1], PIPELINES[i][1]) != 0)
            return 1;
        check_exact(PIPELINES[i][0], gpu, &j);
        size_t min_free = (size_t)-1;
        const double g1 = throughput(&j, gpu, 0, seconds, &min_free);
        const double c1 = throughput(&j, NULL, 1, seconds, NULL);
        const double cn = throughput(&j, NULL, threads, seconds, NULL);
        const double coop = throughput(&j, gpu, threads, seconds, &min_free);
        printf("{\"check\":\"throughput\",\"pipeline\":\"%s\",\"gpu_1\":%.1f,\"cpu_1\":%.1f,\"cpu_%d\":%.1f,"
               "\"cpu_%d_plus_gpu\":%.1f,\"gpu_vs_cpu_1\":%.2f,\"coop_vs_cpu_%d\":%.2f}\n", PIPELINES[i][0], g1, c1,
               threads, cn, threads, coop, c1 > 0 ? g1 / c1 : 0, threads, cn > 0 ? coop / cn : 0);
        spw_gpu_backend_stats(gpu, &st);
        printf("{\"check\":\"memory\",\"pipeline\":\"%s\",\"arena_bytes\":%zu,\"arena_peak\":%zu,"
               "\"device_used_beyond_open\":%lld,\"cpu_elements\":%lld,\"device_errors\":%lld}\n", PIPELINES[i][0],
               st.arena_bytes, st.arena_peak, min_free == (size_t)-1 ? 0LL : (long long)free1 - (long long)min_free,
               (long long)st.cpu_elements, (long long)st.device_errors);
        fflush(stdout);
        if (i == 1) {           /* train: the trainer's own process, batches on the device or on the host */
            int64_t dev_host, dev_dev;
            const double host = executor_rate(&j, gpu, threads, false, seconds, &dev_host);
            const double dev = executor_rate(&j, gpu, threads, true, seconds, &dev_dev);
            printf("{\"check\":\"handover\",\"pipeline\":\"%s\",\"host_batches\":%.1f,\"device_batches\":%.1f,"
                   "\"device_vs_host\":%.2f,\"batches_on_device\":%lld}\n", PIPELINES[i][0], host, dev,
                   host > 0 ? dev / host : 0, (long long)dev_dev);
            fflush(stdout);
        }
        job_close(&j);
    }
    spw_gpu_backend_close(gpu);
    return 0;
}
