/* tests/tools/resample_tool.c - runs ops/wave_resample on raw float32 samples for the reference comparison
 * in tests/audio/resample_reference.py:
 *   resample_tool ORIG NEW N < in.f32 > out.f32
 * Reads N native float32 samples from stdin and writes spw_wave_resample_out_len samples to stdout.
 * Single-threaded; exits 1 with a message on stderr on bad arguments or short input. */
#include <stdio.h>
#include <stdlib.h>

#include "lib/err.h"
#include "ops/wave_resample.h"

static int parse_int64(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

static int resample_stdin(struct spw_wave_resample_plan *plan, int64_t n)
{
    const int64_t m = spw_wave_resample_out_len(plan, n);
    float *in = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    float *out = malloc((size_t)(m > 0 ? m : 1) * sizeof(float));
    int rc = 1;
    if (!in || !out) {
        fprintf(stderr, "resample_tool: out of memory\n");
        goto out;
    }
    if (fread(in, sizeof(float), (size_t)n, stdin) != (size_t)n) {
        fprintf(stderr, "resample_tool: stdin holds fewer than %lld samples\n", (long long)n);
        goto out;
    }
    spw_wave_resample_run(plan, in, n, out);
    if (fwrite(out, sizeof(float), (size_t)m, stdout) != (size_t)m) {
        fprintf(stderr, "resample_tool: short write\n");
        goto out;
    }
    rc = 0;
out:
    free(out);
    free(in);
    return rc;
}

int main(int argc, char **argv)
{
    int64_t orig, new_rate, n;
    if (argc != 4 || parse_int64(argv[1], &orig) || parse_int64(argv[2], &new_rate) || parse_int64(argv[3], &n) ||
        orig < 1 || orig > 1000000 || new_rate < 1 || new_rate > 1000000 || n < 0 || n > ((int64_t)1 << 30)) {
        fprintf(stderr, "usage: resample_tool ORIG NEW N < in.f32 > out.f32 (rates in [1, 1000000], N < 2^30)\n");
        return 1;
    }
    struct spw_wave_resample_plan *plan;
    int rc = spw_wave_resample_plan_create((int)orig, (int)new_rate, 6, 0.99, &plan);
    if (rc != 0) {
        fprintf(stderr, "resample_tool: plan %lld -> %lld: %s\n", (long long)orig, (long long)new_rate,
                spw_strerror(rc));
        return 1;
    }
    rc = resample_stdin(plan, n);
    spw_wave_resample_plan_destroy(plan);
    return rc;
}
