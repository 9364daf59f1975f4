#!/usr/bin/env python3
"""scripts/bench/audio_pipeline.py - bench/audio.sh's pipeline spec (decode_wav, stft, mel, log, SpecAugment)
(run by scripts/bench/audio.sh with the arguments it passes).
"""
import json, sys
spec = {"source": {"format": "wav_folder", "path": sys.argv[1], "shuffle": False},
        "ops": [{"op": "decode_wav"},
                {"op": "stft", "n_fft": 512, "hop_length": 160, "win_length": 400},
                {"op": "mel", "sample_rate": 16000, "n_mels": 80},
                {"op": "log", "eps": 1e-6},
                {"op": "spec_augment", "freq_mask_param": 27, "time_mask_param": 100,
                 "num_freq_masks": 2, "num_time_masks": 2}],
        "batch": {"size": 1}}
with open(sys.argv[2], "w") as f:
    json.dump(spec, f, indent=2)
    f.write("\n")
