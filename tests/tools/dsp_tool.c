/* tests/tools/dsp_tool.c - runs ops/stft and ops/mel on raw float32 for tests/audio/dsp_reference.py (not a
 * feature extractor for users). Single-threaded; reads stdin, writes little-endian float32 to stdout.
 *   dsp_tool stft N_FFT HOP WIN CENTER(0|1) POWER(1|2) N < in.f32 > out.f32      [n_fft/2+1][frames]
 *   dsp_tool mel N_FREQS F_MIN F_MAX N_MELS SR htk|slaney none|slaney > out.f32   [n_freqs][n_mels]
 * Exit status 2 on bad arguments, 1 when the op refuses its input or I/O fails. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "ops/mel.h"
#include "ops/stft.h"

static int usage(void)
{
    fprintf(stderr, "usage: dsp_tool stft N_FFT HOP WIN CENTER(0|1) POWER(1|2) N < in.f32 > out.f32\n"
                    "       dsp_tool mel N_FREQS F_MIN F_MAX N_MELS SR htk|slaney none|slaney > out.f32\n");
    return 2;
}

/* Parses a whole decimal argument into *v; false on junk or overflow. */
static bool parse_long(const char *s, long *v)
{
    char *end;
    errno = 0;
    *v = strtol(s, &end, 10);
    return errno == 0 && end != s && *end == '\0';
}

static bool parse_double(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return errno == 0 && end != s && *end == '\0';
}

static int write_floats(const float *v, size_t n)
{
    if (fwrite(v, sizeof(float), n, stdout) != n || fflush(stdout) != 0) {
        fprintf(stderr, "dsp_tool: write failed\n");
        return 1;
    }
    return 0;
}

static int run_stft(const struct spw_stft_params *p, int64_t n)
{
    const struct spw_stft_plan *plan;
    int rc = spw_stft_plan_get(p, &plan);
    if (rc != 0) {
        fprintf(stderr, "dsp_tool: stft plan: %s\n", spw_strerror(rc));
        return 1;
    }
    int64_t frames = spw_stft_frames(p, n);
    if (frames <= 0) {
        fprintf(stderr, "dsp_tool: %lld samples give no frames (n_fft %d, center %d)\n", (long long)n, p->n_fft,
                p->center);
        return 1;
    }
    size_t n_out = (size_t)(p->n_fft / 2 + 1) * (size_t)frames;
    size_t scratch_bytes = ((size_t)spw_stft_scratch_floats(p) * sizeof(float) + 63) / 64 * 64;
    float *x = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * n_out);
    float *scratch = aligned_alloc(64, scratch_bytes);
    rc = 1;
    if (!x || !out || !scratch) {
        fprintf(stderr, "dsp_tool: out of memory\n");
        goto out;
    }
    if (fread(x, sizeof(float), (size_t)n, stdin) != (size_t)n) {
        fprintf(stderr, "dsp_tool: expected %lld float32 samples on stdin\n", (long long)n);
        goto out;
    }
    spw_stft_run(plan, x, n, out, scratch);
    rc = write_floats(out, n_out);
out:
    free(scratch);
    free(out);
    free(x);
    return rc;
}

static int cmd_stft(char **argv)
{
    long n_fft, hop, win, center, power, n;
    if (!parse_long(argv[0], &n_fft) || !parse_long(argv[1], &hop) || !parse_long(argv[2], &win) ||
        !parse_long(argv[3], &center) || !parse_long(argv[4], &power) || !parse_long(argv[5], &n) ||
        (center != 0 && center != 1) || n < 1 || n_fft > SPW_STFT_MAX_NFFT || win > n_fft || hop > 1 << 30)
        return usage();
    struct spw_stft_params p = {.n_fft = (int)n_fft, .hop_length = (int)hop, .win_length = (int)win,
                                .center = center == 1, .power = (double)power};
    return run_stft(&p, n);
}

static int cmd_mel(char **argv)
{
    long n_freqs, n_mels, sr;
    double f_min, f_max;
    if (!parse_long(argv[0], &n_freqs) || !parse_double(argv[1], &f_min) || !parse_double(argv[2], &f_max) ||
        !parse_long(argv[3], &n_mels) || !parse_long(argv[4], &sr) || n_freqs > 1 << 20 || n_mels > 1 << 20 ||
        sr > 1 << 30)
        return usage();
    enum spw_mel_scale scale;
    enum spw_mel_norm norm;
    if (strcmp(argv[5], "htk") == 0)
        scale = SPW_MEL_HTK;
    else if (strcmp(argv[5], "slaney") == 0)
        scale = SPW_MEL_SLANEY;
    else
        return usage();
    if (strcmp(argv[6], "none") == 0)
        norm = SPW_MEL_NORM_NONE;
    else if (strcmp(argv[6], "slaney") == 0)
        norm = SPW_MEL_NORM_SLANEY;
    else
        return usage();
    struct spw_mel_bank b;
    int rc = spw_mel_bank_init(&b, (int)n_freqs, f_min, f_max, (int)n_mels, (int)sr, scale, norm);
    if (rc != 0) {
        fprintf(stderr, "dsp_tool: mel bank: %s\n", spw_strerror(rc));
        return 1;
    }
    float *dense = malloc(sizeof(float) * (size_t)n_freqs * (size_t)n_mels);
    rc = 1;
    if (dense) {
        spw_mel_bank_dense(&b, dense);
        rc = write_floats(dense, (size_t)n_freqs * (size_t)n_mels);
    }
    free(dense);
    spw_mel_bank_free(&b);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 8 && strcmp(argv[1], "stft") == 0)
        return cmd_stft(argv + 2);
    if (argc == 9 && strcmp(argv[1], "mel") == 0)
        return cmd_mel(argv + 2);
    return usage();
}
