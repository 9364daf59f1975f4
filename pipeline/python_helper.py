# pipeline/python_helper.py - the process behind the "python" op (pipeline/python_op.c), built into the C
# library as a string and run as `python3 -c`: imports users' functions and runs one on a request's elements
# in turn (or, asked {"check": NAME}, says whether NAME imports). Requests and replies are JSON lines on fd 3;
# the elements lie in the shared memory of fd 4 (each input at its "at", outputs from out_off on, or, changed
# in place, where the input was; the first 8 bytes say which element is running), so no element crosses the
# socket. Exits when fd 3 closes or its parent dies. One thread.
import importlib
import inspect
import json
import mmap
import os
import signal
import socket
import struct
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


def check_output(name, out, cap, dtype_names):
    """out's dtype name, or None and why out cannot be an element."""
    dt = dtype_names.get(out.dtype)
    if dt is None:
        return None, "%s returned %s data: return uint8, float32, float16 or int64 (e.g. out.astype(np.float32))" % (
            name, out.dtype.name)
    if out.ndim < 1 or out.ndim > 5:
        return None, "%s returned an array of %d dimensions: 1 to 5" % (name, out.ndim)
    if out.nbytes > cap:
        return None, "%s returned %d bytes, more than the cap of %d" % (name, out.nbytes, cap)
    return dt, None


def run_item(np, name, fn, takes_rng, kwargs, mm, item, off, cap, limit, dtype_names):
    """One element: returns (result, mm, off) - mm remapped when the output needed more room, off where the
    next output may go; result None when the output does not fit after the outputs before it."""
    n = 1
    for d in item["shape"]:
        n *= d
    arr = np.frombuffer(mm, dtype=item["dtype"], count=n, offset=item["at"]).reshape(item["shape"])  # no copy
    try:
        out = fn(arr, rng=np.random.default_rng(item["seed"]), **kwargs) if takes_rng else fn(arr, **kwargs)
        if out is not arr:
            out = np.asarray(out)
    except BaseException as e:           # SystemExit too: a sample's error, not the helper's end
        return {"ok": False, "error": "%s: %.2000s (%s)" % (type(e).__name__, e, where(e))}, mm, off
    dt, why = check_output(name, out, cap, dtype_names)
    if why:
        return {"ok": False, "error": why}, mm, off
    res = {"ok": True, "shape": list(out.shape), "dtype": dt}
    if out is arr or (out.base is not None and out.flags.c_contiguous and
                      out.__array_interface__["data"][0] == arr.__array_interface__["data"][0]):
        res["at"] = item["at"]           # the input itself, changed in place or not: already where it belongs
        return res, mm, off
    del arr
    need = off + out.nbytes
    if need > limit:
        return None, mm, off             # no room beside the outputs before it
    res["at"] = off
    if need > len(mm):
        out = np.array(out)              # out may view the input: keep it before the map goes
        size = min(max(need, 2 * len(mm)), limit)
        mm.close()
        os.ftruncate(4, size)
        mm = mmap.mmap(4, size)
    if out.nbytes:
        np.frombuffer(mm, dtype=out.dtype, count=out.size, offset=off)[...] = out.reshape(-1)
    return res, mm, (need + 63) & ~63


def run(np, fns, mm, req):
    """The request's items in turn, each one's index in the room's first 8 bytes while it runs; stops early
    (the parent sends the rest again) once the outputs pass req["soft"] bytes. Returns (reply, mm)."""
    items = req["items"]
    try:
        fn, takes_rng = fns.get(req["fn"])
    except Exception as e:
        err = {"ok": False, "error": "cannot import %s: %s: %.2000s" % (req["fn"], type(e).__name__, e)}
        return {"results": [err] * len(items), "size": len(mm), "cpu_ns": 0}, mm
    cpu0 = time.process_time_ns()
    results, off, names = [], req["out_off"], {np.dtype(n): n for n in DTYPES}
    for j, item in enumerate(items):
        if j and off - req["out_off"] > req["soft"]:
            break
        struct.pack_into("<q", mm, 0, j)
        res, mm, off = run_item(np, req["fn"], fn, takes_rng, req["kwargs"], mm, item, off, req["max"],
                                req["limit"], names)
        if res is None and j:
            break                        # asked again, first in the next request, where it has the room
        if res is None:
            res = {"ok": False, "error": "%s returned more bytes than the shared memory holds (%d)" % (
                req["fn"], req["limit"])}
        results.append(res)
    struct.pack_into("<q", mm, 0, len(items))
    # the function's CPU: charged to the waiting thread
    return {"results": results, "size": len(mm), "cpu_ns": time.process_time_ns() - cpu0}, mm


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
        if req["size"] != len(mm):                   # the parent grew the room for bigger inputs
            mm.close()
            mm = mmap.mmap(4, req["size"])
        reply, mm = run(np, fns, mm, req)
        send(reply)


main()
