#!/usr/bin/env python3
"""scripts/bench/python_heap_trainer.py - bench/python-heap.sh's trainer: the installed-package way (PYTHONPATH
to the source, the build's library); run with the spec, the dispatcher and the batch count it passes.
"""
import json, resource, sys
__import__("numpy")     # imported first, as a trainer's would be
import spillway
spec, address, batches = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
with spillway.Loader(spec, dispatcher=address, local_cores=0, cut="all", max_batches=batches + 10) as ld:
    it = ld.batches()
    for _ in range(10):                 # warm-up: the job's start is not the figure
        next(it)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    elements = checksum = 0
    for b in it:
        elements += b.n
        checksum += int(b.data[:, 0, 0, 0].sum())
    r1 = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"elements": elements, "cpu_s": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
                  "minflt": r1.ru_minflt - r0.ru_minflt}))
