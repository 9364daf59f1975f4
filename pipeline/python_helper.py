# pipeline/python_helper.py - the process behind the "python" op (pipeline/python_op.c), built into the C
# library as a string and run as `python3 -c`: imports users' functions and runs one on one element at a
# time (or, asked {"check": NAME}, says whether NAME imports). Requests and replies are JSON lines on fd 3; the
# element lies in the shared memory of fd 4 (the input at offset 0, the output at out_off or, changed in
# place, at 0), so no element crosses the socket. Exits when fd 3 closes or its parent dies. One thread.
import importlib
import inspect
import json
import mmap
import os
import signal
import socket
import sys
import time
import traceback

DTYPES = ("uint8", "float32", "float16", "int64")


def die_with_parent():
    """SIGKILL when the thread that started us goes (Linux PR_SET_PDEATHSIG), so no helper outlives it."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, 9)
    except Exception:
        pass


def where(exc):
    """'file.py:12 in name' of the innermost frame of exc's traceback."""
    tb = traceback.extract_tb(exc.__traceback__)
    return "%s:%d in %s" % (tb[-1].filename, tb[-1].lineno, tb[-1].name) if tb else "?"


class Functions:
    """module:qualname -> (function, whether it takes rng), imported once each."""

    def __init__(self):
        self.cache = {}

    def get(self, name):
        if name not in self.cache:
            module, _, qual = name.partition(":")
            obj = importlib.import_module(module)
            for part in qual.split("."):
                obj = getattr(obj, part)
            if not callable(obj):
                raise TypeError("%s is not callable" % name)
            try:
                params = inspect.signature(obj).parameters
                rng = "rng" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
            except (TypeError, ValueError):
                rng = False
            self.cache[name] = (obj, rng)
        return self.cache[name]


def run(np, fns, mm, req):
    """One element: returns (reply, mm) - mm is remapped when the output needs more room."""
    try:
        fn, takes_rng = fns.get(req["fn"])
    except Exception as e:
        return {"ok": False, "error": "cannot import %s: %s: %.2000s" % (req["fn"], type(e).__name__, e)}, mm
    n = 1
    for d in req["shape"]:
        n *= d
    arr = np.frombuffer(mm, dtype=req["dtype"], count=n).reshape(req["shape"])     # a view: no copy
    arr_addr = arr.ctypes.data
    kwargs = dict(req["kwargs"])
    if takes_rng:
        kwargs["rng"] = np.random.default_rng(req["seed"])
    cpu0 = time.process_time_ns()
    try:
        out = np.asarray(fn(arr, **kwargs))
    except BaseException as e:           # SystemExit too: a sample's error, not the helper's end
        return {"ok": False, "error": "%s: %.2000s (%s)" % (type(e).__name__, e, where(e)),
                "cpu_ns": time.process_time_ns() - cpu0}, mm
    finally:
        del arr
    if out.dtype.name not in DTYPES:
        return {"ok": False, "error": "%s returned %s data: return uint8, float32, float16 or int64 (e.g. "
                "out.astype(np.float32))" % (req["fn"], out.dtype.name)}, mm
    if out.ndim < 1 or out.ndim > 5:
        return {"ok": False, "error": "%s returned an array of %d dimensions: 1 to 5" % (req["fn"], out.ndim)}, mm
    off, need = req["out_off"], req["out_off"] + out.nbytes
    if need > req["max"]:
        return {"ok": False, "error": "%s returned %d bytes, more than the cap of %d" % (req["fn"], out.nbytes,
                                                                                         req["max"] - off)}, mm
    reply = {"ok": True, "shape": list(out.shape), "dtype": out.dtype.name, "nbytes": out.nbytes, "size": len(mm),
             "cpu_ns": time.process_time_ns() - cpu0}    # the function's CPU: charged to the waiting thread
    if out.base is not None and out.ctypes.data == arr_addr and out.flags.c_contiguous:
        reply["at"] = 0                  # the input itself, changed in place or not: already where it belongs
        return reply, mm
    reply["at"] = off
    if need > len(mm):
        out = np.array(out)              # out may view the input: keep it before the map goes
        mm.close()
        os.ftruncate(4, need)
        mm = mmap.mmap(4, need)
        reply["size"] = need
    if out.nbytes:
        np.frombuffer(mm, dtype=out.dtype, count=out.size, offset=off)[...] = out.reshape(-1)
    return reply, mm


def main():
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # Ctrl-C is the trainer's to handle; fd 3 closing ends us
    sock = socket.socket(fileno=3)
    f = sock.makefile("rwb")

    def send(obj):
        f.write(json.dumps(obj).encode() + b"\n")
        f.flush()
    try:
        import numpy as np
    except Exception as e:
        send({"ready": False, "error": "numpy cannot be imported by %s: %s: %s" % (sys.executable,
                                                                                   type(e).__name__, e)})
        return
    send({"ready": True, "python": sys.version.split()[0], "numpy": np.__version__})
    fns = Functions()
    mm = mmap.mmap(4, os.fstat(4).st_size)
    for line in f:
        req = json.loads(line)
        if "check" in req:                           # can this function be imported here?
            try:
                send({"ok": True, "rng": fns.get(req["check"])[1]})
            except Exception as e:
                send({"ok": False, "error": "cannot import %s: %s: %.2000s" % (req["check"], type(e).__name__, e)})
            continue
        if req["size"] != len(mm):                   # the parent grew the room for a bigger input
            mm.close()
            mm = mmap.mmap(4, req["size"])
        reply, mm = run(np, fns, mm, req)
        send(reply)


main()
