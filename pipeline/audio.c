/* pipeline/audio.c - the audio ops on element values (see audio.h): thin adapters from a value and an op's
 * parameters to the kernels in ops/ (audio_decode, wav, wave_resample, stft, mel), plus the element-wise
 * spectrogram ops and SpecAugment's masks, which are small enough to live here. Thread-safe: per-call state; resampling
 * plans come from a process-wide cache under a lock and are kept until exit. */
#include "pipeline/audio.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "lib/fastmath.h"
#include "ops/audio_decode.h"
#include "ops/fbank.h"
#include "ops/stft.h"
#include "ops/wav.h"
#include "ops/wave_resample.h"

/* ---- setup: mel banks ---- */

int spw_audio_banks_init(const struct spw_pipeline_spec *spec, struct spw_mel_bank *banks)
{
    int n_fft = 0;
    for (int i = 0; i < spec->n_ops; i++) {
        const struct spw_op_spec *op = &spec->ops[i];
        if (op->kind == SPW_OP_STFT)
            n_fft = op->n_fft;
        if (op->kind != SPW_OP_MEL || n_fft == 0)
            continue;
        const double f_max = op->f_max > 0 ? op->f_max : (double)(op->sample_rate / 2);    /* torchaudio's */
        int rc = spw_mel_bank_init(&banks[i], n_fft / 2 + 1, op->f_min, f_max, op->n_mels, op->sample_rate,
                                   op->mel_scale, op->mel_norm);
        if (rc)
            return rc;
    }
    return 0;
}

void spw_audio_banks_free(const struct spw_pipeline_spec *spec, struct spw_mel_bank *banks)
{
    for (int i = 0; banks && i < spec->n_ops; i++)
        if (spec->ops[i].kind == SPW_OP_MEL)
            spw_mel_bank_free(&banks[i]);
}

/* ---- values ---- */

/* A new float32 tensor value of that shape into *out (its sample rate carried over from v). */
static int new_f32(const struct spw_value *v, int ndim, const int64_t *shape, struct spw_value *out)
{
    memset(out, 0, sizeof *out);
    out->is_tensor = true;
    out->sample_rate = v ? v->sample_rate : 0;
    return spw_tensor_alloc(&out->t, SPW_DTYPE_F32, ndim, shape);
}

static void replace(struct spw_value *v, struct spw_value *with)
{
    spw_value_free(v);
    *v = *with;
}

/* A waveform's channels and samples; false (with a message) when v is not one. */
static bool waveform(const struct spw_value *v, int i, const char *name, int64_t *channels, int64_t *n, char *err,
                     size_t errlen)
{
    if (!v->is_tensor || v->t.dtype != SPW_DTYPE_F32 || v->t.ndim != 2) {
        snprintf(err, errlen, "ops[%d] %s needs a float32 waveform [channels, samples]", i, name);
        return false;
    }
    *channels = v->t.shape[0];
    *n = v->t.shape[1];
    return true;
}

/* A spectrogram's leading size (channels, or 1), rows (freq or mel bins) and frames. */
static bool spectrogram(const struct spw_value *v, int i, const char *name, int64_t *lead, int64_t *rows,
                        int64_t *frames, char *err, size_t errlen)
{
    if (!v->is_tensor || v->t.dtype != SPW_DTYPE_F32 || v->t.ndim < 2 || v->t.ndim > 3) {
        snprintf(err, errlen, "ops[%d] %s needs a float32 spectrogram [freq, time] or [channels, freq, time]", i,
                 name);
        return false;
    }
    *lead = v->t.ndim == 3 ? v->t.shape[0] : 1;
    *rows = v->t.shape[v->t.ndim - 2];
    *frames = v->t.shape[v->t.ndim - 1];
    return true;
}

int spw_audio_op_decode(struct spw_op_call *c, const struct spw_group *g, const uint8_t *buf, size_t len,
                        struct spw_value *v, int *consumed)
{
    const struct spw_pipeline_spec *spec = c->ctx->spec;
    const struct spw_op_spec *op = &spec->ops[0];
    char *err = c->err;
    const size_t errlen = c->errlen;
    *consumed = 1;
    float *data = NULL;
    int channels, rate, rc;
    int64_t frames;
    if (op->kind == SPW_OP_DECODE_AUDIO) {      /* any format by content */
        struct spw_audio_info info;
        rc = spw_audio_decode(buf, len, op->mono, spec->max_samples, &info, &data, err, errlen);
        channels = info.channels, rate = info.sample_rate, frames = info.frames;
    } else {                                    /* decode_wav: WAV only, as it always was */
        struct spw_wav_info info;
        rc = spw_wav_decode(buf, len, op->mono, spec->max_samples, &info, &data, err, errlen);
        channels = info.channels, rate = info.sample_rate, frames = info.frames;
    }
    if (rc)
        return rc;
    memset(v, 0, sizeof *v);
    v->is_tensor = true;
    v->sample_rate = rate;
    v->t.dtype = SPW_DTYPE_F32;
    v->t.ndim = 2;
    v->t.shape[0] = op->mono ? 1 : channels;
    v->t.shape[1] = frames;
    v->t.nbytes = (size_t)(v->t.shape[0] * v->t.shape[1]) * sizeof(float);
    v->t.data = data;
    return 0;
}

/* ---- waveform ops ---- */

#define RESAMPLE_PLANS_MAX 64

static struct {
    pthread_mutex_t mu;
    int n;
    struct resample_key {
        int from, to, width;
        double rolloff;
        struct spw_wave_resample_plan *plan;
    } plans[RESAMPLE_PLANS_MAX];
} resample_cache = {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}};

/* The plan for (from, to, width, rolloff), made on first use and kept (a job meets few distinct rates). */
static int resample_plan(int from, int to, int width, double rolloff, const struct spw_wave_resample_plan **out)
{
    int rc = 0;
    pthread_mutex_lock(&resample_cache.mu);
    struct resample_key *k = NULL;
    for (int i = 0; i < resample_cache.n && !k; i++) {
        struct resample_key *c = &resample_cache.plans[i];
        if (c->from == from && c->to == to && c->width == width && c->rolloff == rolloff)
            k = c;
    }
    if (!k && resample_cache.n == RESAMPLE_PLANS_MAX) {
        rc = -ENOMEM;
    } else if (!k) {
        struct spw_wave_resample_plan *p;
        if ((rc = spw_wave_resample_plan_create(from, to, width, rolloff, &p)) == 0) {
            k = &resample_cache.plans[resample_cache.n++];
            *k = (struct resample_key){from, to, width, rolloff, p};
        }
    }
    if (k)
        *out = k->plan;
    pthread_mutex_unlock(&resample_cache.mu);
    return rc;
}

/* Waveform ops refuse, before allocating, an output over the spec's max_samples (all channels): the decode
 * cap alone does not bound them, since a header may state any rate from 1 Hz (resample to 16 kHz then
 * multiplies the samples by 16000) and pad_audio multiplies its length by the file's channel count. */
static bool within_cap(const struct spw_pipeline_spec *spec, int i, const char *name, int64_t ch, int64_t m,
                       char *err, size_t errlen)
{
    if (ch <= 0 || m <= spec->max_samples / ch)
        return true;
    snprintf(err, errlen, "ops[%d] %s: %lld samples x %lld channels exceed max_samples %lld", i, name,
             (long long)m, (long long)ch, (long long)spec->max_samples);
    return false;
}

static int resample(const struct spw_pipeline_spec *spec, const struct spw_op_spec *op, int i, struct spw_value *v,
                    char *err, size_t errlen)
{
    int64_t ch, n;
    if (!waveform(v, i, "resample", &ch, &n, err, errlen))
        return SPW_EUNSUPPORTED;
    if (v->sample_rate <= 0) {
        snprintf(err, errlen, "ops[%d] resample: the waveform's sample rate is unknown", i);
        return SPW_EUNSUPPORTED;
    }
    if (v->sample_rate == op->rate)
        return 0;
    const struct spw_wave_resample_plan *p;
    int rc = resample_plan(v->sample_rate, op->rate, op->lowpass_filter_width, op->rolloff, &p);
    if (rc) {
        snprintf(err, errlen, "ops[%d] resample %d -> %d Hz: %s", i, v->sample_rate, op->rate, spw_strerror(rc));
        return rc == -EINVAL ? SPW_EUNSUPPORTED : rc;
    }
    const int64_t m = spw_wave_resample_out_len(p, n);
    struct spw_value out;
    if (m < 0) {
        snprintf(err, errlen, "ops[%d] resample: %lld samples at %d -> %d Hz is too long", i, (long long)n,
                 v->sample_rate, op->rate);
        return SPW_ETOOBIG;
    }
    if (!within_cap(spec, i, "resample", ch, m, err, errlen))
        return SPW_ETOOBIG;
    if ((rc = new_f32(v, 2, (int64_t[]){ch, m}, &out)))
        return rc;
    for (int64_t c = 0; c < ch; c++)
        spw_wave_resample_run(p, (const float *)v->t.data + c * n, n, (float *)out.t.data + c * m);
    out.sample_rate = op->rate;
    replace(v, &out);
    return 0;
}

/* Keep samples [start, start + m) of each channel, zero-filling past the end. */
static int window_samples(struct spw_value *v, int64_t ch, int64_t n, int64_t start, int64_t m)
{
    struct spw_value out;
    int rc = new_f32(v, 2, (int64_t[]){ch, m}, &out);
    if (rc)
        return rc;
    const int64_t have = n - start < m ? n - start : m;
    for (int64_t c = 0; c < ch; c++) {
        float *dst = (float *)out.t.data + c * m;
        memcpy(dst, (const float *)v->t.data + c * n + start, (size_t)have * sizeof(float));
        memset(dst + have, 0, (size_t)(m - have) * sizeof(float));
    }
    replace(v, &out);
    return 0;
}

static int crop_or_pad(const struct spw_pipeline_spec *spec, const struct spw_op_spec *op, int i, struct spw_rng *r,
                       struct spw_value *v, char *err, size_t errlen)
{
    int64_t ch, n;
    if (!waveform(v, i, spw_op_name(op->kind), &ch, &n, err, errlen))
        return SPW_EUNSUPPORTED;
    if (op->kind == SPW_OP_RANDOM_CROP_AUDIO && n > op->samples)
        return window_samples(v, ch, n, (int64_t)(spw_rng_u64(r) % (uint64_t)(n - op->samples + 1)), op->samples);
    if (op->kind == SPW_OP_PAD_AUDIO && n < op->samples) {
        if (!within_cap(spec, i, "pad_audio", ch, op->samples, err, errlen))
            return SPW_ETOOBIG;
        return window_samples(v, ch, n, 0, op->samples);
    }
    if (op->kind == SPW_OP_PAD_AUDIO && op->trim && n > op->samples)
        return window_samples(v, ch, n, 0, op->samples);
    return 0;
}

/* Peak normalization per channel (librosa.util.normalize's default, norm=inf): max |x| becomes 1; a silent
 * channel stays silent. */
static int normalize_audio(int i, struct spw_value *v, char *err, size_t errlen)
{
    int64_t ch, n;
    if (!waveform(v, i, "normalize_audio", &ch, &n, err, errlen))
        return SPW_EUNSUPPORTED;
    for (int64_t c = 0; c < ch; c++) {
        float *x = (float *)v->t.data + c * n, peak = 0;
        for (int64_t k = 0; k < n; k++)
            peak = fabsf(x[k]) > peak ? fabsf(x[k]) : peak;
        if (peak > 0)
            for (int64_t k = 0; k < n; k++)
                x[k] /= peak;
    }
    return 0;
}

/* ---- spectrograms ---- */

/* Checks a mel op can take this spectrogram; 0 or SPW_EUNSUPPORTED with a message. */
static int mel_fits(const struct spw_op_spec *op, const struct spw_mel_bank *bank, int i, int64_t rows, int rate,
                    char *err, size_t errlen)
{
    if (rows != bank->n_freqs) {
        snprintf(err, errlen, "ops[%d] mel: the spectrogram has %lld frequency bins, the bank is for %d", i,
                 (long long)rows, bank->n_freqs);
        return SPW_EUNSUPPORTED;
    }
    if (rate > 0 && rate != op->sample_rate) {
        snprintf(err, errlen, "ops[%d] mel: sample_rate is %d but the audio is %d Hz (resample it first)", i,
                 op->sample_rate, rate);
        return SPW_EUNSUPPORTED;
    }
    return 0;
}

struct mel_sink {
    const struct spw_mel_bank *bank;
    int64_t frames;
    float *out;
};

static void mel_of_frames(void *ctx, const float *mag, int stride, int64_t t0, int count)
{
    const struct mel_sink *m = ctx;
    spw_mel_apply_frames(m->bank, mag, stride, count, t0, m->frames, m->out);
}

/* stft, and when the next op is mel (bank non-NULL), mel of each few frames as they come: the linear
 * spectrogram is never stored. */
static int stft(const struct spw_op_spec *op, const struct spw_op_spec *mel_op, const struct spw_mel_bank *bank,
                int i, struct spw_value *v, char *err, size_t errlen)
{
    int64_t ch, n;
    if (!waveform(v, i, "stft", &ch, &n, err, errlen))
        return SPW_EUNSUPPORTED;
    const struct spw_stft_params p = {op->n_fft, op->hop_length, op->win_length, op->center, op->power};
    const struct spw_stft_plan *plan;
    int rc = spw_stft_plan_get(&p, &plan);
    if (rc) {
        snprintf(err, errlen, "ops[%d] stft: %s", i, spw_strerror(rc));
        return rc;
    }
    const int64_t frames = spw_stft_frames(&p, n);
    if (frames < 1) {
        snprintf(err, errlen, "ops[%d] stft: %lld samples are too few for n_fft %d%s", i, (long long)n, op->n_fft,
                 op->center ? " with center padding" : "");
        return SPW_EUNSUPPORTED;
    }
    const int64_t freqs = op->n_fft / 2 + 1;
    if (bank && (rc = mel_fits(mel_op, bank, i + 1, freqs, v->sample_rate, err, errlen)))
        return rc;
    const int64_t rows = bank ? bank->n_mels : freqs;
    struct spw_value out;
    if (ch == 1)
        rc = new_f32(v, 2, (int64_t[]){rows, frames}, &out);
    else
        rc = new_f32(v, 3, (int64_t[]){ch, rows, frames}, &out);
    if (rc)
        return rc;
    const size_t scratch_bytes = ((size_t)spw_stft_scratch_floats(&p) * sizeof(float) + 63) / 64 * 64;
    float *scratch = aligned_alloc(64, scratch_bytes);
    if (!scratch) {
        spw_value_free(&out);
        return -ENOMEM;
    }
    for (int64_t c = 0; c < ch; c++) {
        const float *x = (const float *)v->t.data + c * n;
        float *dst = (float *)out.t.data + c * rows * frames;
        if (bank) {
            struct mel_sink sink = {bank, frames, dst};
            spw_stft_run_frames(plan, x, n, mel_of_frames, &sink, scratch);
        } else {
            spw_stft_run(plan, x, n, dst, scratch);
        }
    }
    free(scratch);
    replace(v, &out);
    return bank ? SPW_OP_RAN_NEXT : 0;
}

static int mel(const struct spw_op_spec *op, const struct spw_mel_bank *bank, int i, struct spw_value *v, char *err,
               size_t errlen)
{
    int64_t lead, rows, frames;
    if (!spectrogram(v, i, "mel", &lead, &rows, &frames, err, errlen))
        return SPW_EUNSUPPORTED;
    int rc = mel_fits(op, bank, i, rows, v->sample_rate, err, errlen);
    if (rc)
        return rc;
    struct spw_value out;
    int64_t shape[3] = {lead, bank->n_mels, frames};
    rc = v->t.ndim == 3 ? new_f32(v, 3, shape, &out) : new_f32(v, 2, shape + 1, &out);
    if (rc)
        return rc;
    for (int64_t c = 0; c < lead; c++)
        spw_mel_apply(bank, (const float *)v->t.data + c * rows * frames, frames,
                      (float *)out.t.data + c * bank->n_mels * frames);
    replace(v, &out);
    return 0;
}

/* x[k] = ln(x[k] + eps) for n values: the fast path for blocks of normal positive sums, libm's logf for a
 * block holding anything else (zeros, subnormals, infinities, NaN), which come out as logf gives them. */
static void log_inplace(float *x, int64_t n, float eps)
{
    enum { BLOCK = 64 };
    for (int64_t b = 0; b < n; b += BLOCK) {
        const int len = n - b < BLOCK ? (int)(n - b) : BLOCK;
        float *v = x + b;
        uint32_t odd = 0;
        for (int k = 0; k < len; k++) {
            union { float f; uint32_t u; } a = {.f = v[k] + eps};
            odd |= a.u - 0x00800000u >= 0x7f000000u;           /* not in [FLT_MIN, FLT_MAX] */
        }
        if (odd) {
            for (int k = 0; k < len; k++)
                v[k] = logf(v[k] + eps);
        } else {
            spw_fast_log_block(v, len, eps);
        }
    }
}

/* x[k] = mult * log10(max(x[k], amin)) (as ln times mult * log10(e), by spw_fast_log_block where every value is
 * a normal float, else log10f); returns the largest. */
static float db_inplace(float *x, int64_t n, float mult, float amin)
{
    enum { BLOCK = 64 };
    const float scale = mult * 0.4342944819032518f;
    float top = -INFINITY;
    for (int64_t b = 0; b < n; b += BLOCK) {
        const int len = n - b < BLOCK ? (int)(n - b) : BLOCK;
        float *v = x + b;
        uint32_t odd = 0;
        for (int k = 0; k < len; k++) {
            v[k] = v[k] > amin ? v[k] : amin;
            union { float f; uint32_t u; } a = {.f = v[k]};
            odd |= a.u - 0x00800000u >= 0x7f000000u;           /* not in [FLT_MIN, FLT_MAX] */
        }
        if (odd) {
            for (int k = 0; k < len; k++)
                v[k] = mult * log10f(v[k]);
        } else {
            spw_fast_log_block(v, len, 0.0f);
            for (int k = 0; k < len; k++)
                v[k] *= scale;
        }
        for (int k = 0; k < len; k++)
            top = v[k] > top ? v[k] : top;
    }
    return top;
}

/* log(x + eps), or torchaudio's AmplitudeToDB: multiplier * log10(max(x, 1e-10)) (ref 1), then with top_db
 * floored at the spectrogram's max - top_db. */
static int log_scale(const struct spw_op_spec *op, int i, struct spw_value *v, char *err, size_t errlen)
{
    int64_t lead, rows, frames;
    if (!spectrogram(v, i, spw_op_name(op->kind), &lead, &rows, &frames, err, errlen))
        return SPW_EUNSUPPORTED;
    float *x = v->t.data;
    const int64_t n = lead * rows * frames;
    if (op->kind == SPW_OP_LOG) {
        log_inplace(x, n, (float)op->eps);
        return 0;
    }
    const float mult = op->stype == SPW_DB_POWER ? 10.0f : 20.0f;
    const float top = db_inplace(x, n, mult, 1e-10f);
    if (op->top_db > 0) {
        const float floor_db = top - (float)op->top_db;
        for (int64_t k = 0; k < n; k++)
            x[k] = x[k] > floor_db ? x[k] : floor_db;
    }
    return 0;
}

/* One mask along an axis of `size` as torchaudio's mask_along_axis: width floor(u1 * param), start
 * floor(u2 * (size - u1 * param)); [*start, *end) clamped to the axis. */
static void mask_span(struct spw_rng *r, int param, int64_t size, int64_t *start, int64_t *end)
{
    const double value = spw_rng_uniform(r) * param;
    const double min_value = spw_rng_uniform(r) * ((double)size - value);
    int64_t s = (int64_t)min_value, e = s + (int64_t)value;     /* truncation toward zero, as .long() */
    *start = s < 0 ? 0 : s > size ? size : s;
    *end = e < *start ? *start : e > size ? size : e;
}

/* SpecAugment (Park et al. 2019) without time warping: frequency masks, then time masks, set to 0, the same
 * for every channel (torchaudio's iid_masks=False). */
static int spec_augment(const struct spw_op_spec *op, int i, struct spw_rng *r, struct spw_value *v, char *err,
                        size_t errlen)
{
    int64_t lead, rows, frames, s, e;
    if (!spectrogram(v, i, "spec_augment", &lead, &rows, &frames, err, errlen))
        return SPW_EUNSUPPORTED;
    float *x = v->t.data;
    for (int m = 0; m < op->num_freq_masks && op->freq_mask_param > 0; m++) {
        mask_span(r, op->freq_mask_param, rows, &s, &e);
        for (int64_t c = 0; c < lead; c++)
            for (int64_t f = s; f < e; f++)
                memset(x + (c * rows + f) * frames, 0, (size_t)frames * sizeof(float));
    }
    for (int m = 0; m < op->num_time_masks && op->time_mask_param > 0; m++) {
        mask_span(r, op->time_mask_param, frames, &s, &e);
        for (int64_t row = 0; row < lead * rows && e > s; row++)
            memset(x + row * frames + s, 0, (size_t)(e - s) * sizeof(float));
    }
    return 0;
}

/* ---- the registry's runs ---- */

int spw_audio_op_resample(struct spw_op_call *c, struct spw_value *v)
{
    return resample(c->ctx->spec, c->op, c->index, v, c->err, c->errlen);
}

int spw_audio_op_crop_or_pad(struct spw_op_call *c, struct spw_value *v)
{
    return crop_or_pad(c->ctx->spec, c->op, c->index, &c->rng, v, c->err, c->errlen);
}

int spw_audio_op_normalize(struct spw_op_call *c, struct spw_value *v)
{
    return normalize_audio(c->index, v, c->err, c->errlen);
}

int spw_audio_op_stft(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_pipeline_spec *spec = c->ctx->spec;
    const int i = c->index;
    const bool fuse = i + 1 < spec->n_ops && spec->ops[i + 1].kind == SPW_OP_MEL;
    return stft(c->op, fuse ? &spec->ops[i + 1] : NULL, fuse ? &c->ctx->mel_banks[i + 1] : NULL, i, v, c->err,
                c->errlen);
}

int spw_audio_op_fbank(struct spw_op_call *c, struct spw_value *v)
{
    const struct spw_op_spec *op = c->op;
    const int i = c->index;
    int64_t ch, n;
    if (!waveform(v, i, "fbank", &ch, &n, c->err, c->errlen))
        return SPW_EUNSUPPORTED;
    if (v->sample_rate > 0 && v->sample_rate != op->sample_frequency) {
        snprintf(c->err, c->errlen, "ops[%d] fbank: the audio is %d Hz and sample_frequency %g (resample it, or "
                 "set sample_frequency)", i, v->sample_rate, op->sample_frequency);
        return SPW_EUNSUPPORTED;
    }
    const struct spw_fbank_params p = {
        .num_mel_bins = op->n_mels, .frame_length = op->frame_length, .frame_shift = op->frame_shift,
        .sample_frequency = op->sample_frequency, .dither = op->dither,
        .preemphasis_coefficient = op->preemphasis_coefficient, .energy_floor = op->energy_floor,
        .low_freq = op->f_min, .high_freq = op->f_max, .window_type = op->window_type,
        .remove_dc_offset = op->remove_dc_offset, .raw_energy = op->raw_energy, .use_energy = op->use_energy,
        .htk_compat = op->htk_compat, .snip_edges = op->snip_edges};
    const struct spw_fbank *fb;
    char why[200];
    int rc = spw_fbank_get(&p, &fb, why, sizeof why);
    if (rc) {
        snprintf(c->err, c->errlen, "ops[%d] fbank: %s", i, why);
        return rc == -EINVAL ? SPW_EUNSUPPORTED : rc;
    }
    const int64_t frames = spw_fbank_frames(fb, n);
    if (frames < 1) {
        snprintf(c->err, c->errlen, "ops[%d] fbank: %lld samples are fewer than one frame of %d", i, (long long)n,
                 fb->window_size);
        return SPW_EUNSUPPORTED;
    }
    struct spw_value out;
    if ((rc = new_f32(v, 2, (int64_t[]){spw_fbank_rows(fb), frames}, &out)) != 0)
        return rc;
    const size_t scratch_bytes = ((size_t)spw_fbank_scratch_floats(fb) * sizeof(float) + 63) / 64 * 64;
    float *scratch = aligned_alloc(64, scratch_bytes);
    if (!scratch) {
        spw_value_free(&out);
        return -ENOMEM;
    }
    spw_fbank_run(fb, v->t.data, n, &c->rng, out.t.data, scratch);     /* channel 0, as torchaudio's */
    free(scratch);
    replace(v, &out);
    return 0;
}

int spw_audio_op_mel(struct spw_op_call *c, struct spw_value *v)
{
    return mel(c->op, &c->ctx->mel_banks[c->index], c->index, v, c->err, c->errlen);
}

int spw_audio_op_trim_frames(struct spw_op_call *c, struct spw_value *v)
{
    int64_t lead, rows, frames;
    if (!spectrogram(v, c->index, "trim_frames", &lead, &rows, &frames, c->err, c->errlen))
        return SPW_EUNSUPPORTED;
    const int64_t keep = c->op->frames;
    if (frames <= keep)
        return 0;
    float *x = v->t.data;                   /* rows of `frames` become rows of `keep`, in place */
    for (int64_t r = 0; r < lead * rows; r++)
        memmove(x + r * keep, x + r * frames, (size_t)keep * sizeof(float));
    v->t.shape[v->t.ndim - 1] = keep;
    v->t.nbytes = (size_t)(lead * rows * keep) * sizeof(float);
    return 0;
}

int spw_audio_op_scale_shift(struct spw_op_call *c, struct spw_value *v)
{
    int64_t lead, rows, frames;
    if (!spectrogram(v, c->index, "scale_shift", &lead, &rows, &frames, c->err, c->errlen))
        return SPW_EUNSUPPORTED;
    float *x = v->t.data;
    const float a = (float)c->op->factor, b = (float)c->op->offset;
    for (int64_t k = 0; k < lead * rows * frames; k++)
        x[k] = x[k] * a + b;
    return 0;
}

int spw_audio_op_log_scale(struct spw_op_call *c, struct spw_value *v)
{
    return log_scale(c->op, c->index, v, c->err, c->errlen);
}

int spw_audio_op_spec_augment(struct spw_op_call *c, struct spw_value *v)
{
    return spec_augment(c->op, c->index, &c->rng, v, c->err, c->errlen);
}
