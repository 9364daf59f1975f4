#!/usr/bin/env python3
"""scripts/gpu_check_report.py - gpu-check.sh's summary of the device results
(run by scripts/gpu-check.sh with the arguments it passes).
"""
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for f in ("gpucheck.jsonl", "torch.jsonl") for l in open(f"{out}/{f}") if l.startswith("{")]
for r in [r for r in rows if r["check"] == "exact"]:
    print(f'exact   {r["pipeline"]:15s} {r["byte_equal"]}/{r["elements"]} byte-equal, max |diff| {r["max_abs_diff"]}')
for r in [r for r in rows if r["check"] == "throughput"]:
    print(f'speed   {r["pipeline"]:15s} gpu {r["gpu_1"]}/s, cpu x1 {r["cpu_1"]}/s, gpu/cpu1 {r["gpu_vs_cpu_1"]}, '
          f'cpu+gpu vs cpu {[v for k, v in r.items() if k.startswith("coop")][0]}')
for r in [r for r in rows if r["check"] == "handover"]:
    print(f'handover {r["pipeline"]:14s} device batches {r["device_batches"]}/s vs host {r["host_batches"]}/s: '
          f'{r["device_vs_host"]}x ({r["batches_on_device"]} on the device)')
for r in [r for r in rows if r["check"] == "memory"]:
    print(f'memory  {r["pipeline"]:15s} arena peak {r["arena_peak"]} of {r["arena_bytes"]}, beyond: '
          f'{r["device_used_beyond_open"]}, on cpu {r["cpu_elements"]}, errors {r["device_errors"]}')
peer = [r for r in rows if r["check"] == "peer_torchvision_gpu"]
ra = [r for r in rows if r["check"] == "throughput" and r["pipeline"] == "randaugment"]
if peer and ra:
    print(f'vs torchvision on GPU (randaugment): {ra[0]["gpu_1"] / peer[0]["images_per_s"]:.2f}x')
for r in [r for r in rows if r["check"] == "training_slowdown"]:
    print(f'training slowdown beside Spillway: {100 * r["slowdown"]:.1f}% '
          f'({r["step_ms_alone"]} -> {r["step_ms_beside_spillway"]} ms/step)')
