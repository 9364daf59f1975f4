#!/usr/bin/env python3
"""tests/cli/make_wav_cases.py OUT - the WAV inputs of tests/cli/audio.sh, deterministic (seeded).

OUT/main       class folders cat/ dog/ holding good 16 kHz clips (>= 16000 samples) mixed with malformed or
               unsupported ones; OUT/main.good lists the good paths, OUT/main.bad has "PATH<TAB>expected message
               fragment" per bad file, in enumeration order (sorted class, then sorted name).
OUT/decode     class folder x/ with clips that must decode to exactly soundfile's float32 samples: stereo PCM16,
               float32, WAVE_FORMAT_EXTENSIBLE (PCM16 and float), LIST (odd size, padded) + fact chunks,
               unsigned 8, 24 and 32-bit PCM, float64, A-law, mu-law, big-endian RIFX, EXTENSIBLE with 20 valid
               bits in 24.
OUT/rates      class folder x/: mono clips at 22050, 44100 and 8000 Hz, lengths not multiples of the ratio.
OUT/stereo     class folder x/: stereo PCM16 clips of 16000 frames, left != right.
OUT/slow       class folder x/: one 1000 Hz clip of 16000 frames (resampled to 16 kHz: 256000 samples).
OUT/flat       flat folder with labels.tsv (classes out of order, a sub-folder, a blank line, CRLF, ".." inside
               a name and a class) and its clips, plus one unlisted clip; OUT/flat.expect has "PATH<TAB>LABEL"
               per listed clip.
OUT/shards     shard-0.tar, shard-1.tar with KEY.wav + KEY.cls members (plus a KEY.txt, a lone KEY.wav, and
               in shard-1 a truncated clips/s1_bad.wav with its .cls); OUT/shards.expect has
               "SHARD:KEY.wav<TAB>LABEL" per good sample.
"""
import io
import os
import struct
import sys
import tarfile

import numpy as np
import soundfile as sf

OUT = sys.argv[1]
rng = np.random.default_rng(1234)


def tone(n, rate=16000, channels=1, freq=440.0):
    t = np.arange(n) / rate
    x = 0.5 * np.sin(2 * np.pi * freq * t) + 0.05 * rng.standard_normal(n)
    if channels == 1:
        return x.astype(np.float32)
    return np.stack([x * (0.5 + 0.5 * c / channels) for c in range(channels)], axis=1).astype(np.float32)


def wav_bytes(x, rate=16000, subtype="PCM_16", fmt="WAV"):
    b = io.BytesIO()
    sf.write(b, x, rate, subtype=subtype, format=fmt)
    return b.getvalue()


def chunk(cid, body):
    return cid + struct.pack("<I", len(body)) + body + (b"\0" if len(body) % 2 else b"")


def riff(*chunks, riff_size=None):
    body = b"WAVE" + b"".join(chunks)
    return b"RIFF" + struct.pack("<I", len(body) if riff_size is None else riff_size) + body


def fmt_body(tag=1, channels=1, rate=16000, bits=16):
    align = channels * bits // 8
    return struct.pack("<HHIIHH", tag, channels, rate, rate * align, align, bits)


def wavex_fmt_body(subtag, channels=1, rate=16000, bits=16, valid=None):
    align = channels * bits // 8
    guid = struct.pack("<IHH", subtag, 0, 0x10) + bytes([0x80, 0, 0, 0xAA, 0, 0x38, 0x9B, 0x71])
    return struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, rate * align, align, bits, 22,
                       bits if valid is None else valid, 0) + guid


def pcm16(x):
    return (np.clip(x, -1, 1 - 1 / 32768) * 32768).astype("<i2").tobytes()


def put(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# ---- main: good clips and bad ones side by side ----
main = os.path.join(OUT, "main")
good = {
    "cat/a_16k.wav": wav_bytes(tone(16000)),
    "cat/c_long.wav": wav_bytes(tone(40000)),
    "cat/e_float.wav": wav_bytes(tone(20000), subtype="FLOAT"),
    "dog/b_stereo.wav": wav_bytes(tone(17000, channels=2)),
    "dog/d_wavex.wav": wav_bytes(tone(16500), fmt="WAVEX"),
    "dog/f_list.wav": riff(chunk(b"fmt ", fmt_body()), chunk(b"LIST", b"INFOISFT\x05\0\0\0spw!\0\0"),
                           chunk(b"fact", struct.pack("<I", 18000)), chunk(b"data", pcm16(tone(18000)))),
    "dog/g_streamed.wav": riff(chunk(b"fmt ", fmt_body()), b"data" + struct.pack("<I", 0xFFFFFFFF) +
                               pcm16(tone(16000)), riff_size=0xFFFFFFFF),
    "cat/h_pcm24.wav": wav_bytes(tone(16000), subtype="PCM_24"),
    "cat/i_pcm32.wav": wav_bytes(tone(16000), subtype="PCM_32"),
    "dog/h_alaw.wav": wav_bytes(tone(16000), subtype="ALAW"),
    "dog/i_float64.wav": wav_bytes(tone(16000), subtype="DOUBLE"),
    "dog/j_pcm8.wav": wav_bytes(tone(16000), subtype="PCM_U8"),
    "dog/k_ulaw_wavex.wav": wav_bytes(tone(16000), subtype="ULAW", fmt="WAVEX"),
}
good_pcm = pcm16(tone(16000))
hdr44 = riff(chunk(b"fmt ", fmt_body()), chunk(b"data", good_pcm))
bad = [  # (path, bytes, message fragment)
    ("cat/bad_magic.wav", b"RIFY" + hdr44[4:], "not a RIFF/WAVE file"),
    ("cat/empty.wav", b"", "file is 0 bytes, shorter than the 12-byte RIFF header"),
    ("cat/fmt_past_end.wav", riff(b"fmt " + struct.pack("<I", 4096) + fmt_body(), chunk(b"data", good_pcm[:64])),
     "'fmt ' chunk at offset 12 says 4096 bytes, past the end"),
    ("cat/huge_data.wav", riff(chunk(b"fmt ", fmt_body()), riff_size=0xFFFFFFF8) + b"data" +
     struct.pack("<I", 0xFFFFFFF0) + good_pcm,
     "truncated data: data chunk says 4294967280 bytes"),
    ("cat/ms_adpcm.wav", riff(chunk(b"fmt ", struct.pack("<HHIIHH", 2, 1, 16000, 8000, 256, 4)),
                              chunk(b"data", good_pcm[:512])), "MS ADPCM (format tag 2) is not supported"),
    ("cat/random.wav", rng.integers(0, 256, 4096, dtype=np.uint8).tobytes(), "not a RIFF/WAVE file"),
    ("cat/too_long.wav", wav_bytes(tone(300000)), "300000 samples (300000 frames x 1 channels) exceed the cap"),
    ("cat/trunc_data.wav", hdr44[:44 + 10000], "truncated data: data chunk says 32000 bytes, the file holds 10000"),
    ("dog/align.wav", riff(chunk(b"fmt ", struct.pack("<HHIIHH", 1, 3, 8000, 32000, 4, 24)),
                           chunk(b"data", good_pcm[:4000])), "block_align is 4, not channels 3 * 3 bytes (24 bits)"),
    ("dog/data_first.wav", riff(chunk(b"data", good_pcm), chunk(b"fmt ", fmt_body())), "comes before any fmt chunk"),
    ("dog/float16.wav", riff(chunk(b"fmt ", fmt_body(tag=3)), chunk(b"data", good_pcm)),
     "16-bit float (format tag 3) is not supported"),
    ("dog/no_data.wav", riff(chunk(b"fmt ", fmt_body()), chunk(b"LIST", b"INFO")), "no data chunk"),
    ("dog/pcm36.wav", riff(chunk(b"fmt ", struct.pack("<HHIIHH", 1, 1, 16000, 80000, 5, 36)),
                           chunk(b"data", good_pcm[:5000])), "36-bit PCM (format tag 1) is not supported"),
    ("dog/short.wav", wav_bytes(tone(200)), "200 samples are too few for n_fft 512 with center padding"),
    ("dog/trunc_header.wav", hdr44[:30], "'fmt ' chunk at offset 12 says 16 bytes, past the end"),
    ("dog/gsm_wavex.wav", riff(chunk(b"fmt ", wavex_fmt_body(0x31)), chunk(b"data", good_pcm)),
     "GSM 6.10 (format tag 49) is not supported"),
    ("dog/zero_channels.wav", riff(chunk(b"fmt ", struct.pack("<HHIIHH", 1, 0, 16000, 0, 0, 16)),
                                   chunk(b"data", good_pcm)), "channels is 0"),
    ("dog/zero_frames.wav", riff(chunk(b"fmt ", fmt_body()), chunk(b"data", b"")), "0 samples are too few"),
]
for p, data in good.items():
    put(os.path.join(main, p), data)
for p, data, _ in bad:
    put(os.path.join(main, p), data)
with open(os.path.join(OUT, "main.good"), "w") as f:
    f.writelines(os.path.join(main, p) + "\n" for p in sorted(good))
with open(os.path.join(OUT, "main.bad"), "w") as f:
    f.writelines("%s\t%s\n" % (os.path.join(main, p), m) for p, _, m in sorted(bad))

# ---- decode: exotic but valid layouts, checked sample for sample against soundfile ----
dec = os.path.join(OUT, "decode", "x")
put(os.path.join(dec, "a_stereo16.wav"), wav_bytes(tone(5000, channels=2)))
put(os.path.join(dec, "b_float32.wav"), wav_bytes(tone(5000), subtype="FLOAT"))
put(os.path.join(dec, "c_wavex16.wav"), wav_bytes(tone(5000, channels=2), fmt="WAVEX"))
put(os.path.join(dec, "d_wavexfloat.wav"), wav_bytes(tone(5000, channels=3), subtype="FLOAT", fmt="WAVEX"))
put(os.path.join(dec, "e_list_fact.wav"), good["dog/f_list.wav"])
put(os.path.join(dec, "f_pcm8.wav"), wav_bytes(tone(5000, channels=2), subtype="PCM_U8"))
put(os.path.join(dec, "g_pcm24.wav"), wav_bytes(tone(5000, channels=2), subtype="PCM_24"))
put(os.path.join(dec, "h_pcm32.wav"), wav_bytes(tone(5000, channels=3), subtype="PCM_32"))
put(os.path.join(dec, "i_float64x.wav"), wav_bytes(tone(5000, channels=2), subtype="DOUBLE", fmt="WAVEX"))
put(os.path.join(dec, "j_alaw.wav"), wav_bytes(tone(5000, channels=2), subtype="ALAW"))
put(os.path.join(dec, "k_ulawx.wav"), wav_bytes(tone(5000), subtype="ULAW", fmt="WAVEX"))
b = io.BytesIO()
sf.write(b, tone(5000, channels=2), 16000, subtype="PCM_24", format="WAV", endian="BIG")      # RIFX
put(os.path.join(dec, "l_rifx24.wav"), b.getvalue())
pcm24 = rng.integers(0, 1 << 24, 2 * 5000).astype("<u4").view(np.uint8).reshape(-1, 4)[:, :3].tobytes()
put(os.path.join(dec, "m_wavex_20in24.wav"),            # low 4 bits set too: soundfile scales by the container
    riff(chunk(b"fmt ", wavex_fmt_body(1, channels=2, bits=24, valid=20)), chunk(b"data", pcm24)))

# ---- rates: resampling lengths ----
for rate, n in ((22050, 22051), (44100, 44101), (8000, 8001), (22050, 1)):
    put(os.path.join(OUT, "rates", "x", "r%05d_%d.wav" % (rate, n)), wav_bytes(tone(n, rate=rate), rate=rate))

# ---- stereo: mono false keeps two channels ----
for k in range(3):
    put(os.path.join(OUT, "stereo", "x", "s%d.wav" % k), wav_bytes(tone(16000, channels=2)))

# ---- slow: a low rate that resampling multiplies ----
put(os.path.join(OUT, "slow", "x", "slow.wav"), wav_bytes(tone(16000, rate=1000, freq=50.0), rate=1000))

# ---- flat folder with labels.tsv ----
flat = os.path.join(OUT, "flat")
rows = [("z1.wav", "zebra"), ("sub/a1.wav", "ant"), ("m1.wav", "moth"), ("a2.wav", "ant"), ("m2.wav", "moth"),
        ("take..2.wav", "x..y")]
for p, _ in rows:
    put(os.path.join(flat, p), wav_bytes(tone(16000)))
put(os.path.join(flat, "unlisted.wav"), wav_bytes(tone(16000)))
with open(os.path.join(flat, "labels.tsv"), "w", newline="") as f:
    f.write("z1.wav\tzebra\r\nsub/a1.wav\tant\n\nm1.wav\tmoth\na2.wav\tant\nm2.wav\tmoth\ntake..2.wav\tx..y\n")
classes = sorted({c for _, c in rows})
with open(os.path.join(OUT, "flat.expect"), "w") as f:
    f.writelines("%s/%s\t%d\n" % (flat, p, classes.index(c)) for p, c in sorted(rows))

# ---- tar shards ----
shards = os.path.join(OUT, "shards")
os.makedirs(shards, exist_ok=True)
expect = []


def add(t, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))


for s in range(2):
    path = os.path.join(shards, "shard-%d.tar" % s)
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        for k in range(4):
            key = "clips/s%d_%02d" % (s, k)
            label = (s * 4 + k) % 3
            add(t, key + ".wav", wav_bytes(tone(16000 + 37 * k)))
            add(t, key + ".cls", b"%d\n" % label)
            add(t, key + ".txt", b"a transcript")
            expect.append("%s:%s.wav\t%d" % (path, key, label))
        add(t, "clips/s%d_lone.wav" % s, wav_bytes(tone(16000)))          # no .cls: not a sample
        if s == 1:
            add(t, "clips/s1_bad.wav", wav_bytes(tone(16000))[:1000])
            add(t, "clips/s1_bad.cls", b"2\n")
with open(os.path.join(OUT, "shards.expect"), "w") as f:
    f.writelines(e + "\n" for e in sorted(expect))
