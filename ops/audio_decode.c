/* ops/audio_decode.c - format by content and the compressed decoders (libFLAC, libmpg123, libvorbisfile,
 * libopusfile), each reading the caller's buffer through the library's memory or callback API, each writing
 * through one bounded planar sink that checks max_samples before it allocates or grows. WAV goes to
 * ops/wav. Not an encoder and no resampling. Thread-safe: per-call decoders; libmpg123's one-time init runs
 * under pthread_once. */
#include "ops/audio_decode.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include <FLAC/stream_decoder.h>
#include <mpg123.h>
#include <opusfile.h>
#define OV_EXCLUDE_STATIC_CALLBACKS
#include <vorbis/vorbisfile.h>

#include "lib/err.h"
#include "ops/wav.h"

enum spw_audio_format spw_audio_sniff(const uint8_t *buf, size_t len)
{
    if (len >= 12 && (memcmp(buf, "RIFF", 4) == 0 || memcmp(buf, "RIFX", 4) == 0) && memcmp(buf + 8, "WAVE", 4) == 0)
        return SPW_AUDIO_WAV;
    if (len >= 4 && memcmp(buf, "fLaC", 4) == 0)
        return SPW_AUDIO_FLAC;
    if (len >= 10 && memcmp(buf, "ID3", 3) == 0) {
        /* ID3v2: a 10-byte header, a syncsafe size, a 10-byte footer when flagged; libFLAC skips such a tag
         * too, so what follows tells FLAC from MP3. */
        const size_t size = (size_t)(buf[6] & 0x7f) << 21 | (size_t)(buf[7] & 0x7f) << 14 |
                            (size_t)(buf[8] & 0x7f) << 7 | (size_t)(buf[9] & 0x7f);
        const size_t end = 10 + size + ((buf[5] & 0x10) ? 10 : 0);
        if (end <= len && len - end >= 4 && memcmp(buf + end, "fLaC", 4) == 0)
            return SPW_AUDIO_FLAC;
        return SPW_AUDIO_MP3;
    }
    if (len >= 27 && memcmp(buf, "OggS", 4) == 0) {
        /* the first page's first packet is the codec's identification header */
        const size_t body = 27 + (size_t)buf[26];
        if (body + 8 <= len && memcmp(buf + body, "OpusHead", 8) == 0)
            return SPW_AUDIO_OPUS;
        if (body + 7 <= len && memcmp(buf + body, "\x01vorbis", 7) == 0)
            return SPW_AUDIO_VORBIS;
        return SPW_AUDIO_UNKNOWN;
    }
    /* an MPEG audio frame header: 11 sync bits, a version other than reserved (01), a layer other than
     * reserved (00: ADTS AAC), a bitrate index other than 15 and a rate index other than 3 */
    if (len >= 4 && buf[0] == 0xFF && (buf[1] & 0xE0) == 0xE0 && ((buf[1] >> 3) & 3) != 1 && ((buf[1] >> 1) & 3) != 0 &&
        (buf[2] >> 4) != 15 && ((buf[2] >> 2) & 3) != 3)
        return SPW_AUDIO_MP3;
    return SPW_AUDIO_UNKNOWN;
}

const char *spw_audio_format_name(enum spw_audio_format f)
{
    switch (f) {
    case SPW_AUDIO_WAV: return "WAV";
    case SPW_AUDIO_FLAC: return "FLAC";
    case SPW_AUDIO_MP3: return "MP3";
    case SPW_AUDIO_VORBIS: return "Ogg Vorbis";
    case SPW_AUDIO_OPUS: return "Ogg Opus";
    case SPW_AUDIO_UNKNOWN: break;
    }
    return "unknown";
}

/* ---- the output: planar float32 that grows within max_samples --------------------------------------- */

struct pcm_sink {
    const char *codec;          /* for messages */
    int channels;               /* in the stream */
    int out_channels;           /* 1 when downmixing, else channels */
    int64_t max_frames;         /* max_samples / out_channels */
    int64_t max_samples;
    int64_t cap, n;             /* frames allocated per plane, frames written */
    float *data;                /* plane c at data + c * cap */
};

static int sink_init(struct pcm_sink *s, const char *codec, int channels, bool downmix, int64_t max_samples, char *err,
                     size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->codec = codec;
    if (channels < 1 || channels > SPW_WAV_MAX_CHANNELS)
        return spw_fail(err, errlen, SPW_EUNSUPPORTED, "%s: %d channels, not in [1, %d]", codec, channels,
                        SPW_WAV_MAX_CHANNELS);
    s->channels = channels;
    s->out_channels = downmix ? 1 : channels;
    s->max_samples = max_samples;
    s->max_frames = max_samples / s->out_channels;
    return 0;
}

static int too_big(const struct pcm_sink *s, int64_t frames, const char *what, char *err, size_t errlen)
{
    return spw_fail(err, errlen, SPW_ETOOBIG, "%s: %s %lld frames x %d channels, over the cap of %lld samples",
                    s->codec, what, (long long)frames, s->out_channels, (long long)s->max_samples);
}

/* Room for frames frames in all; grows geometrically, never past max_frames. */
static int sink_reserve(struct pcm_sink *s, int64_t frames, char *err, size_t errlen)
{
    if (frames <= s->cap)
        return 0;
    if (frames > s->max_frames)
        return too_big(s, frames, "decodes to more than", err, errlen);
    int64_t cap = s->cap * 2 > frames ? s->cap * 2 : frames;
    if (cap < 16384)
        cap = 16384;
    if (cap > s->max_frames)
        cap = s->max_frames;
    if ((uint64_t)cap * (uint64_t)s->out_channels > SIZE_MAX / sizeof(float))
        return too_big(s, frames, "decodes to more than", err, errlen);
    float *d = realloc(s->data, (size_t)cap * (size_t)s->out_channels * sizeof(float));
    if (!d)
        return -ENOMEM;
    /* planes move up from the last one down: plane c's new start is past every lower plane's old data */
    for (int c = s->out_channels - 1; c > 0; c--)
        memmove(d + (size_t)c * (size_t)cap, d + (size_t)c * (size_t)s->cap, (size_t)s->n * sizeof(float));
    s->data = d;
    s->cap = cap;
    return 0;
}

/* Append frames frames of sample(c, i), stored planar or averaged over the channels (the sum in channel
 * order times 1/channels, as ops/wav's downmix). The caller has reserved the room. */
#define SINK_PUT(s, frames, sample)                                                                            \
    do {                                                                                                       \
        const int64_t base_ = (s)->n;                                                                          \
        if ((s)->out_channels == (s)->channels) {                                                              \
            for (int c = 0; c < (s)->channels; c++) {                                                          \
                float *dst_ = (s)->data + (size_t)c * (size_t)(s)->cap + base_;                                \
                for (int64_t i = 0; i < (frames); i++)                                                         \
                    dst_[i] = (sample);                                                                        \
            }                                                                                                  \
        } else {                                                                                               \
            const float inv_ = 1.0f / (float)(s)->channels;                                                    \
            float *dst_ = (s)->data + base_;                                                                   \
            for (int64_t i = 0; i < (frames); i++) {                                                           \
                float sum_ = 0.0f;                                                                             \
                for (int c = 0; c < (s)->channels; c++)                                                        \
                    sum_ += (sample);                                                                          \
                dst_[i] = sum_ * inv_;                                                                         \
            }                                                                                                  \
        }                                                                                                      \
        (s)->n += (frames);                                                                                    \
    } while (0)

static int sink_put_interleaved(struct pcm_sink *s, const float *x, int64_t frames, char *err, size_t errlen)
{
    int rc = sink_reserve(s, s->n + frames, err, errlen);
    if (rc)
        return rc;
    const int ch = s->channels;
    SINK_PUT(s, frames, x[i * ch + c]);
    return 0;
}

static int sink_put_planar(struct pcm_sink *s, float *const *x, int64_t frames, char *err, size_t errlen)
{
    int rc = sink_reserve(s, s->n + frames, err, errlen);
    if (rc)
        return rc;
    SINK_PUT(s, frames, x[c][i]);
    return 0;
}

/* Hand the samples over: planes packed to n frames each. Refuses an empty decode. */
static int sink_finish(struct pcm_sink *s, float **out, int64_t *frames, char *err, size_t errlen)
{
    if (s->n == 0)
        return spw_fail(err, errlen, SPW_EDECODE, "%s: no audio samples decoded", s->codec);
    for (int c = 1; c < s->out_channels; c++)
        memmove(s->data + (size_t)c * (size_t)s->n, s->data + (size_t)c * (size_t)s->cap, (size_t)s->n * sizeof(float));
    if (s->n < s->cap) {
        float *d = realloc(s->data, (size_t)s->n * (size_t)s->out_channels * sizeof(float));
        if (d)
            s->data = d;
    }
    *out = s->data;
    *frames = s->n;
    s->data = NULL;
    return 0;
}

/* ---- FLAC (libFLAC's stream decoder over the buffer) ------------------------------------------------- */

struct flac_ctx {
    const uint8_t *buf;
    size_t len, pos;
    struct pcm_sink sink;
    bool have_info, corrupt;
    FLAC__StreamDecoderErrorStatus first_error;
    unsigned channels, rate, bits;
    uint64_t total;
    int rc;                     /* a refusal decided in a callback */
    char *err;
    size_t errlen;
};

static FLAC__StreamDecoderReadStatus flac_read(const FLAC__StreamDecoder *d, FLAC__byte buffer[], size_t *bytes,
                                               void *cd)
{
    (void)d;
    struct flac_ctx *x = cd;
    size_t n = x->len - x->pos < *bytes ? x->len - x->pos : *bytes;
    if (n == 0) {
        *bytes = 0;
        return FLAC__STREAM_DECODER_READ_STATUS_END_OF_STREAM;
    }
    memcpy(buffer, x->buf + x->pos, n);
    x->pos += n;
    *bytes = n;
    return FLAC__STREAM_DECODER_READ_STATUS_CONTINUE;
}

static FLAC__StreamDecoderWriteStatus flac_write(const FLAC__StreamDecoder *d, const FLAC__Frame *frame,
                                                 const FLAC__int32 *const buffer[], void *cd)
{
    (void)d;
    struct flac_ctx *x = cd;
    if (x->corrupt || x->rc)
        return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
    if (frame->header.channels != x->channels || frame->header.bits_per_sample != x->bits) {
        x->rc = spw_fail(x->err, x->errlen, SPW_EDECODE, "FLAC: corrupt: a frame of %u channels x %u bits in a "
                         "stream of %u x %u", frame->header.channels, frame->header.bits_per_sample, x->channels,
                         x->bits);
        return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
    }
    const int64_t frames = frame->header.blocksize;
    if ((x->rc = sink_reserve(&x->sink, x->sink.n + frames, x->err, x->errlen)))
        return FLAC__STREAM_DECODER_WRITE_STATUS_ABORT;
    /* 2^(bits - 1) is a power of two: the division is exact, as libsndfile's scaling */
    const float scale = (float)(1u << (x->bits - 1));
    SINK_PUT(&x->sink, frames, (float)buffer[c][i] / scale);
    return FLAC__STREAM_DECODER_WRITE_STATUS_CONTINUE;
}

static void flac_metadata(const FLAC__StreamDecoder *d, const FLAC__StreamMetadata *m, void *cd)
{
    (void)d;
    struct flac_ctx *x = cd;
    if (m->type != FLAC__METADATA_TYPE_STREAMINFO)
        return;
    x->have_info = true;
    x->channels = m->data.stream_info.channels;
    x->rate = m->data.stream_info.sample_rate;
    x->bits = m->data.stream_info.bits_per_sample;
    x->total = m->data.stream_info.total_samples;
}

/* libFLAC reports a damaged frame here and goes on (writing silence for a frame that fails its CRC): the
 * first one is kept and the decode refused. */
static void flac_error(const FLAC__StreamDecoder *d, FLAC__StreamDecoderErrorStatus status, void *cd)
{
    (void)d;
    struct flac_ctx *x = cd;
    if (!x->corrupt) {
        x->corrupt = true;
        x->first_error = status;
    }
}

static int decode_flac(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_audio_info *info,
                       float **out, char *err, size_t errlen)
{
    struct flac_ctx x = {.buf = buf, .len = len, .err = err, .errlen = errlen};
    int rc = 0;
    FLAC__StreamDecoder *dec = FLAC__stream_decoder_new();
    if (!dec)
        return -ENOMEM;
    if (FLAC__stream_decoder_init_stream(dec, flac_read, NULL, NULL, NULL, NULL, flac_write, flac_metadata,
                                         flac_error, &x) != FLAC__STREAM_DECODER_INIT_STATUS_OK) {
        rc = spw_fail(err, errlen, SPW_EINTERNAL, "FLAC: the decoder did not initialise");
        goto out;
    }
    if (!FLAC__stream_decoder_process_until_end_of_metadata(dec) && !x.have_info) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: corrupt metadata (%s)",
                      FLAC__StreamDecoderStateString[FLAC__stream_decoder_get_state(dec)]);
        goto out;
    }
    if (!x.have_info) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: truncated or corrupt: no STREAMINFO in %zu bytes%s%s", len,
                      x.corrupt ? "; " : "", x.corrupt ? FLAC__StreamDecoderErrorStatusString[x.first_error] : "");
        goto out;
    }
    if (x.rate == 0 || x.rate > SPW_WAV_MAX_RATE || x.bits < 4 || x.bits > 32) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: STREAMINFO states %u Hz and %u bits per sample", x.rate, x.bits);
        goto out;
    }
    if ((rc = sink_init(&x.sink, "FLAC", (int)x.channels, downmix, max_samples, err, errlen)))
        goto out;
    /* STREAMINFO's total (36 bits; 0 when the encoder did not know it) is checked before allocating */
    if (x.total > (uint64_t)x.sink.max_frames) {
        rc = too_big(&x.sink, (int64_t)x.total, "STREAMINFO states", err, errlen);
        goto out;
    }
    if ((rc = sink_reserve(&x.sink, (int64_t)x.total, err, errlen)))
        goto out;
    FLAC__stream_decoder_process_until_end_of_stream(dec);
    if (x.rc) {
        rc = x.rc;
        goto out;
    }
    if (x.corrupt) {
        /* a cut frame loses libFLAC its sync at the end of the data, as damage in the middle would */
        const char *status = FLAC__StreamDecoderErrorStatusString[x.first_error];
        if (x.first_error == FLAC__STREAM_DECODER_ERROR_STATUS_LOST_SYNC && (uint64_t)x.sink.n < x.total)
            rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: truncated or damaged: the frames stop after %lld of the "
                          "%llu samples STREAMINFO states (%s)", (long long)x.sink.n, (unsigned long long)x.total,
                          status);
        else
            rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: corrupt: %s after %lld samples", status,
                          (long long)x.sink.n);
        goto out;
    }
    const FLAC__StreamDecoderState st = FLAC__stream_decoder_get_state(dec);
    if (st != FLAC__STREAM_DECODER_END_OF_STREAM) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: decoding stopped: %s", FLAC__StreamDecoderStateString[st]);
        goto out;
    }
    if (x.total != 0 && (uint64_t)x.sink.n != x.total) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "FLAC: %s: %lld samples per channel decoded, STREAMINFO states %llu",
                      (uint64_t)x.sink.n < x.total ? "truncated" : "corrupt", (long long)x.sink.n,
                      (unsigned long long)x.total);
        goto out;
    }
    int64_t frames;
    if ((rc = sink_finish(&x.sink, out, &frames, err, errlen)))
        goto out;
    *info = (struct spw_audio_info){SPW_AUDIO_FLAC, (int)x.channels, (int)x.rate, frames};
out:
    free(x.sink.data);
    FLAC__stream_decoder_delete(dec);
    return rc;
}

/* ---- MP3 (libmpg123 reading the buffer through replaced I/O, as libsndfile sets it up) --------------- */

struct mem_file {
    const uint8_t *buf;
    size_t len, pos;
};

static ssize_t mem_read(void *h, void *dst, size_t n)
{
    struct mem_file *f = h;
    if (n > f->len - f->pos)
        n = f->len - f->pos;
    memcpy(dst, f->buf + f->pos, n);
    f->pos += n;
    return (ssize_t)n;
}

static int64_t mem_seek(struct mem_file *f, int64_t off, int whence)
{
    int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (int64_t)f->pos : (int64_t)f->len;
    if (whence != SEEK_SET && whence != SEEK_CUR && whence != SEEK_END)
        return -1;
    if (off < -base || base + off > (int64_t)f->len)
        return -1;
    f->pos = (size_t)(base + off);
    return (int64_t)f->pos;
}

static off_t mem_lseek(void *h, off_t off, int whence)
{
    return (off_t)mem_seek(h, (int64_t)off, whence);
}

static pthread_once_t mpg123_once = PTHREAD_ONCE_INIT;
static int mpg123_init_rc;
static void mpg123_init_once(void) { mpg123_init_rc = mpg123_init(); }

static int decode_mp3(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_audio_info *info,
                      float **out, char *err, size_t errlen)
{
    struct mem_file f = {buf, len, 0};
    struct pcm_sink sink = {0};
    int rc = 0, e = MPG123_OK;
    pthread_once(&mpg123_once, mpg123_init_once);
    if (mpg123_init_rc != MPG123_OK)
        return spw_fail(err, errlen, SPW_EINTERNAL, "MP3: libmpg123 did not initialise");
    mpg123_handle *mh = mpg123_new(NULL, &e);
    if (!mh)
        return e == MPG123_OUT_OF_MEM ? -ENOMEM
                                      : spw_fail(err, errlen, SPW_EINTERNAL, "MP3: %s", mpg123_plain_strerror(e));
    /* libsndfile's settings: float output, gapless (the LAME tag's encoder delay and padding removed), no
     * resampling, and a stream that changes format mid-way ends there */
    mpg123_param(mh, MPG123_REMOVE_FLAGS, MPG123_AUTO_RESAMPLE, 0.0);
    mpg123_param(mh, MPG123_ADD_FLAGS, MPG123_FORCE_FLOAT | MPG123_GAPLESS | MPG123_NO_FRANKENSTEIN | MPG123_QUIET,
                 0.0);
    long rate = 0;
    int channels = 0, encoding = 0;
    if (mpg123_replace_reader_handle(mh, mem_read, mem_lseek, NULL) != MPG123_OK ||
        mpg123_open_handle(mh, &f) != MPG123_OK || mpg123_getformat(mh, &rate, &channels, &encoding) != MPG123_OK) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "MP3: no MPEG audio frame found (%s)", mpg123_strerror(mh));
        goto out;
    }
    if (rate <= 0 || rate > SPW_WAV_MAX_RATE) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "MP3: sample rate %ld", rate);
        goto out;
    }
    /* The LAME/Xing tag's frame count (when there is a LAME tag: its encoder delay is known) against the
     * frames the buffer holds: fewer is a truncated file. mpg123_scan counts them by their headers, which
     * also makes mpg123_length exact. */
    long delay = -1;
    double unused;
    const off_t tag_frames = mpg123_getstate(mh, MPG123_ENC_DELAY, &delay, &unused) == MPG123_OK && delay >= 0
                                 ? mpg123_framelength(mh) : -1;
    if (mpg123_scan(mh) != MPG123_OK) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "MP3: corrupt: %s", mpg123_strerror(mh));
        goto out;
    }
    const off_t frames_held = mpg123_framelength(mh);
    if (tag_frames > 0 && frames_held < tag_frames) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "MP3: truncated: %lld MPEG frames, the LAME tag states %lld",
                      (long long)frames_held, (long long)tag_frames);
        goto out;
    }
    if ((rc = sink_init(&sink, "MP3", channels, downmix, max_samples, err, errlen)))
        goto out;
    const off_t length = mpg123_length(mh);
    if (length > sink.max_frames) {
        rc = too_big(&sink, (int64_t)length, "its frames hold", err, errlen);
        goto out;
    }
    if (mpg123_format_none(mh) != MPG123_OK || mpg123_format(mh, rate, channels, MPG123_ENC_FLOAT_32) != MPG123_OK) {
        rc = spw_fail(err, errlen, SPW_EINTERNAL, "MP3: float output refused: %s", mpg123_strerror(mh));
        goto out;
    }
    if (length > 0 && (rc = sink_reserve(&sink, (int64_t)length, err, errlen)))
        goto out;
    float pcm[4608];            /* 2 channels x 1152 samples (one layer III frame), twice */
    for (;;) {
        size_t done = 0;
        e = mpg123_read(mh, pcm, sizeof pcm, &done);
        const int64_t frames = (int64_t)(done / (sizeof(float) * (size_t)channels));
        if (frames > 0 && (rc = sink_put_interleaved(&sink, pcm, frames, err, errlen)))
            goto out;
        if (e == MPG123_DONE)
            break;
        if (e == MPG123_NEW_FORMAT) {
            rc = spw_fail(err, errlen, SPW_EDECODE, "MP3: the format changes mid-stream");
            goto out;
        }
        if (e != MPG123_OK) {
            rc = spw_fail(err, errlen, SPW_EDECODE, "MP3: corrupt: %s", mpg123_strerror(mh));
            goto out;
        }
    }
    int64_t frames;
    if ((rc = sink_finish(&sink, out, &frames, err, errlen)))
        goto out;
    *info = (struct spw_audio_info){SPW_AUDIO_MP3, channels, (int)rate, frames};
out:
    free(sink.data);
    mpg123_close(mh);
    mpg123_delete(mh);
    return rc;
}

/* ---- Ogg: the page structure, then Vorbis (libvorbisfile) or Opus (libopusfile) ---------------------- */

/* The buffer must be whole Ogg pages back to back, the last one flagged end-of-stream: a cut page or a
 * missing final page is a truncated file. (Page CRCs are the decoders' to check: a bad one is a hole.) */
static int ogg_check_pages(const uint8_t *buf, size_t len, const char *codec, char *err, size_t errlen)
{
    size_t pos = 0;
    uint8_t last_flags = 0;
    while (pos < len) {
        if (len - pos < 27)
            return spw_fail(err, errlen, SPW_EDECODE, "%s: truncated: a page header cut at byte %zu", codec, len);
        if (memcmp(buf + pos, "OggS", 4) != 0 || buf[pos + 4] != 0)
            return spw_fail(err, errlen, SPW_EDECODE, "%s: corrupt: no Ogg page at byte %zu", codec, pos);
        const size_t nseg = buf[pos + 26];
        if (len - pos < 27 + nseg)
            return spw_fail(err, errlen, SPW_EDECODE, "%s: truncated: a page header cut at byte %zu", codec, len);
        size_t body = 0;
        for (size_t i = 0; i < nseg; i++)
            body += buf[pos + 27 + i];
        if (len - pos - 27 - nseg < body)
            return spw_fail(err, errlen, SPW_EDECODE, "%s: truncated: the page at byte %zu is cut at byte %zu",
                            codec, pos, len);
        last_flags = buf[pos + 5];
        pos += 27 + nseg + body;
    }
    if (!(last_flags & 0x04))
        return spw_fail(err, errlen, SPW_EDECODE, "%s: truncated: the last page (ending at byte %zu) is not an "
                        "end-of-stream page", codec, len);
    return 0;
}

static size_t ov_mem_read(void *ptr, size_t size, size_t nmemb, void *h)
{
    if (size == 0)
        return 0;
    return (size_t)mem_read(h, ptr, size * nmemb) / size;
}

static int ov_mem_seek(void *h, ogg_int64_t off, int whence)
{
    return mem_seek(h, off, whence) < 0 ? -1 : 0;
}

static long ov_mem_tell(void *h)
{
    return (long)((struct mem_file *)h)->pos;
}

static const char *ov_error(int e)
{
    switch (e) {
    case OV_EREAD: return "read error";
    case OV_ENOTVORBIS: return "not Vorbis data";
    case OV_EVERSION: return "unsupported Vorbis version";
    case OV_EBADHEADER: return "bad Vorbis header";
    case OV_EFAULT: return "internal decoder fault";
    case OV_HOLE: return "a gap in the data (a damaged or missing page)";
    case OV_EBADLINK: return "a damaged link";
    case OV_EINVAL: return "invalid stream";
    default: return "error";
    }
}

static int decode_vorbis(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_audio_info *info,
                         float **out, char *err, size_t errlen)
{
    int rc = ogg_check_pages(buf, len, "Ogg Vorbis", err, errlen);
    if (rc)
        return rc;
    struct mem_file f = {buf, len, 0};
    struct pcm_sink sink = {0};
    const ov_callbacks cb = {ov_mem_read, ov_mem_seek, NULL, ov_mem_tell};
    OggVorbis_File vf;
    int e = ov_open_callbacks(&f, &vf, NULL, 0, cb);
    if (e < 0)
        return spw_fail(err, errlen, SPW_EDECODE, "Ogg Vorbis: %s", ov_error(e));
    const vorbis_info *vi = ov_info(&vf, 0);
    const int channels = vi ? vi->channels : 0;
    const long rate = vi ? vi->rate : 0;
    for (long l = 1; l < ov_streams(&vf); l++) {
        const vorbis_info *li = ov_info(&vf, (int)l);
        if (!li || li->channels != channels || li->rate != rate) {
            rc = spw_fail(err, errlen, SPW_EUNSUPPORTED, "Ogg Vorbis: chained streams of different channels or "
                          "rates (link %ld)", l);
            goto out;
        }
    }
    if (rate <= 0 || rate > SPW_WAV_MAX_RATE) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "Ogg Vorbis: sample rate %ld", rate);
        goto out;
    }
    if ((rc = sink_init(&sink, "Ogg Vorbis", channels, downmix, max_samples, err, errlen)))
        goto out;
    /* the last granule position states the length: checked before allocating */
    const ogg_int64_t total = ov_pcm_total(&vf, -1);
    if (total < 0) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "Ogg Vorbis: no length (%s)", ov_error((int)total));
        goto out;
    }
    if (total > sink.max_frames) {
        rc = too_big(&sink, (int64_t)total, "its last granule states", err, errlen);
        goto out;
    }
    if ((rc = sink_reserve(&sink, (int64_t)total, err, errlen)))
        goto out;
    for (;;) {
        float **pcm;
        int link;
        const long n = ov_read_float(&vf, &pcm, 4096, &link);
        if (n == 0)
            break;
        if (n < 0) {
            rc = spw_fail(err, errlen, SPW_EDECODE, "Ogg Vorbis: corrupt: %s", ov_error((int)n));
            goto out;
        }
        if ((rc = sink_put_planar(&sink, pcm, n, err, errlen)))
            goto out;
    }
    int64_t frames;
    if ((rc = sink_finish(&sink, out, &frames, err, errlen)))
        goto out;
    *info = (struct spw_audio_info){SPW_AUDIO_VORBIS, channels, (int)rate, frames};
out:
    free(sink.data);
    ov_clear(&vf);
    return rc;
}

static const char *op_error(int e)
{
    switch (e) {
    case OP_EREAD: return "read error";
    case OP_EFAULT: return "internal decoder fault";
    case OP_EIMPL: return "a feature libopusfile does not implement";
    case OP_EINVAL: return "invalid stream";
    case OP_ENOTFORMAT: return "not Opus data";
    case OP_EBADHEADER: return "bad Opus header";
    case OP_EVERSION: return "unsupported Opus header version";
    case OP_EBADLINK: return "a damaged link";
    case OP_EBADPACKET: return "a bad packet";
    case OP_EBADTIMESTAMP: return "a bad granule position";
    case OP_HOLE: return "a gap in the data (a damaged or missing page)";
    default: return "error";
    }
}

#define OPUS_RATE 48000         /* libopusfile always decodes at 48 kHz */

static int decode_opus(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_audio_info *info,
                       float **out, char *err, size_t errlen)
{
    int rc = ogg_check_pages(buf, len, "Ogg Opus", err, errlen);
    if (rc)
        return rc;
    struct pcm_sink sink = {0};
    int e = 0;
    OggOpusFile *of = op_open_memory(buf, len, &e);
    if (!of)
        return spw_fail(err, errlen, e == OP_EFAULT ? -ENOMEM : SPW_EDECODE, "Ogg Opus: %s", op_error(e));
    const int channels = op_channel_count(of, 0);
    for (int l = 1; l < op_link_count(of); l++)
        if (op_channel_count(of, l) != channels) {
            rc = spw_fail(err, errlen, SPW_EUNSUPPORTED, "Ogg Opus: chained streams of different channel counts "
                          "(link %d)", l);
            goto out;
        }
    if ((rc = sink_init(&sink, "Ogg Opus", channels, downmix, max_samples, err, errlen)))
        goto out;
    const ogg_int64_t total = op_pcm_total(of, -1);
    if (total < 0) {
        rc = spw_fail(err, errlen, SPW_EDECODE, "Ogg Opus: no length (%s)", op_error((int)total));
        goto out;
    }
    if (total > sink.max_frames) {
        rc = too_big(&sink, (int64_t)total, "its last granule states", err, errlen);
        goto out;
    }
    if ((rc = sink_reserve(&sink, (int64_t)total, err, errlen)))
        goto out;
    float pcm[5760 * 4];        /* 120 ms at 48 kHz (the longest packet) in stereo, twice */
    const int per_read = (int)(sizeof pcm / sizeof pcm[0]) / channels * channels;
    float *big = NULL;
    float *dst = pcm;
    int room = per_read;
    if (room < 5760 * channels) {       /* many channels: room for one whole packet */
        if (!(big = malloc((size_t)5760 * (size_t)channels * sizeof(float)))) {
            rc = -ENOMEM;
            goto out;
        }
        dst = big, room = 5760 * channels;
    }
    for (;;) {
        const int n = op_read_float(of, dst, room, NULL);
        if (n == 0)
            break;
        if (n < 0) {
            rc = spw_fail(err, errlen, SPW_EDECODE, "Ogg Opus: corrupt: %s", op_error(n));
            break;
        }
        if ((rc = sink_put_interleaved(&sink, dst, n, err, errlen)))
            break;
    }
    free(big);
    if (rc)
        goto out;
    int64_t frames;
    if ((rc = sink_finish(&sink, out, &frames, err, errlen)))
        goto out;
    *info = (struct spw_audio_info){SPW_AUDIO_OPUS, channels, OPUS_RATE, frames};
out:
    free(sink.data);
    op_free(of);
    return rc;
}

/* ---- dispatch --------------------------------------------------------------------------------------- */

int spw_audio_decode(const uint8_t *buf, size_t len, bool downmix, int64_t max_samples, struct spw_audio_info *info,
                     float **out, char *err, size_t errlen)
{
    switch (spw_audio_sniff(buf, len)) {
    case SPW_AUDIO_WAV: {
        struct spw_wav_info wi;
        int rc = spw_wav_decode(buf, len, downmix, max_samples, &wi, out, err, errlen);
        if (rc == 0)
            *info = (struct spw_audio_info){SPW_AUDIO_WAV, wi.channels, wi.sample_rate, wi.frames};
        return rc;
    }
    case SPW_AUDIO_FLAC: return decode_flac(buf, len, downmix, max_samples, info, out, err, errlen);
    case SPW_AUDIO_MP3: return decode_mp3(buf, len, downmix, max_samples, info, out, err, errlen);
    case SPW_AUDIO_VORBIS: return decode_vorbis(buf, len, downmix, max_samples, info, out, err, errlen);
    case SPW_AUDIO_OPUS: return decode_opus(buf, len, downmix, max_samples, info, out, err, errlen);
    case SPW_AUDIO_UNKNOWN: break;
    }
    if (len >= 4 && memcmp(buf, "OggS", 4) == 0)
        return spw_fail(err, errlen, len >= 27 + 8 ? SPW_EUNSUPPORTED : SPW_EDECODE,
                        "audio: an Ogg stream of neither Vorbis nor Opus (or cut before its first packet); "
                        "decode_audio reads WAV, FLAC, MP3, Ogg Vorbis and Ogg Opus");
    char magic[3 * 4 + 1] = "";
    for (size_t i = 0; i < len && i < 4; i++)
        snprintf(magic + 3 * i, sizeof magic - 3 * i, "%02x ", buf[i]);
    return spw_fail(err, errlen, SPW_EDECODE, "audio: not WAV, FLAC, MP3, Ogg Vorbis or Ogg Opus (%zu bytes, "
                    "starting %s)", len, len ? magic : "with nothing");
}
