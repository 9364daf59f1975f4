# spillway/_lib.py - ctypes declarations for libspillway.so (client/include/spillway/client.h, its flat face
# for bindings): loaded once, on first use, from the package's own folder (an installed package or wheel
# carries it), else $SPILLWAY_LIB, else <repo>/build/lib/libspillway.so (a source checkout).
# Not an API of its own: loader.py and pipeline.py (the op schema) are its users. Thread model: ctypes releases the GIL in every call;
# the C rules apply (one thread drives a job; loading is guarded by a lock).
import ctypes
import os
import threading

# lib/err.h
SPW_ESPEC = -1001
SPW_ESOURCE = -1004
SPW_ECLOSED = -1005
SPW_EFORKED = -1009
ENOENT = 2
EINVAL = 22

# lib/tensor.h: enum spw_dtype -> numpy dtype string (little-endian, as the C side writes .npy files)
DTYPES = {0: "|u1", 1: "<f4", 2: "<f2", 3: "<i8"}
TENSOR_MAX_DIMS = 5


_P = ctypes.c_void_p
_I = ctypes.c_int
_PROTOS = {   # name: (restype, argtypes)
    "spw_strerror": (ctypes.c_char_p, [_I]),
    "spw_job_opts_new": (_P, []),
    "spw_job_opts_set": (_I, [_P, ctypes.c_char_p, ctypes.c_char_p]),
    "spw_job_opts_free": (None, [_P]),
    "spw_job_opts_cancel_flag": (None, [_P, ctypes.POINTER(ctypes.c_int)]),
    "spw_job_create_json": (_I, [ctypes.c_char_p, _P, ctypes.POINTER(_P), ctypes.c_char_p, ctypes.c_size_t]),
    "spw_job_next": (_I, [_P, ctypes.POINTER(_P)]),
    "spw_job_release": (None, [_P, _P]),
    "spw_job_errmsg": (ctypes.c_char_p, [_P]),
    "spw_job_stats_json": (_I, [_P, ctypes.c_char_p, ctypes.c_size_t]),
    "spw_job_destroy": (None, [_P]),
    "spw_job_stop": (None, [_P]),
    "spw_job_classes": (_I, [_P, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p))]),
    "spw_job_batches_per_epoch": (ctypes.c_int64, [_P]),
    "spw_job_checkpoint_flat": (_P, [_P, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_uint64),
                                     ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                                     ctypes.POINTER(_I)]),
    "spw_free": (None, [_P]),
    "spw_op_schema": (_P, []),
    "spw_batch_position": (_I, [_P, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64)]),
    "spw_batch_elements": (_I, [_P]),
    "spw_batch_tensor_count": (_I, [_P]),
    "spw_batch_view_count": (_I, [_P]),
    "spw_batch_tensor_name": (ctypes.c_char_p, [_P, _I]),
    "spw_batch_tensor_at": (_I, [_P, _I, ctypes.POINTER(_I), ctypes.POINTER(_I), ctypes.POINTER(ctypes.c_int64),
                                 ctypes.POINTER(_P), ctypes.POINTER(ctypes.c_size_t)]),
    "spw_batch_key_at": (_I, [_P, _I, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64),
                              ctypes.POINTER(ctypes.c_char_p)]),
    "spw_batch_device": (_I, [_P, _I, ctypes.POINTER(_I), ctypes.POINTER(_I)]),
    "spw_batch_dlpack": (_P, [_P, _I, _P, _P]),
}

_lock = threading.Lock()
_lib = None


def library_paths():
    """Where the library is looked for, in order: the package's folder, $SPILLWAY_LIB, the repository's
    build/lib (this package run from a source checkout)."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = [os.path.join(here, "libspillway.so")]
    if os.environ.get("SPILLWAY_LIB"):
        paths.append(os.environ["SPILLWAY_LIB"])
    paths.append(os.path.normpath(os.path.join(here, "..", "..", "..", "build", "lib", "libspillway.so")))
    return paths


def lib():
    """The loaded library with every prototype declared (OSError naming the paths tried when none loads)."""
    global _lib
    with _lock:
        if _lib is None:
            tried = []
            for path in library_paths():
                if not os.path.exists(path):
                    tried.append("%s: not there" % path)
                    continue
                try:
                    handle = ctypes.CDLL(path)
                    break
                except OSError as e:
                    tried.append("%s: %s" % (path, e))
            else:
                raise OSError("spillway: cannot load libspillway.so (%s); install the package (pip install "
                              "./client/python), build it with `make all`, or set SPILLWAY_LIB"
                              % "; ".join(tried))
            for name, (restype, argtypes) in _PROTOS.items():
                fn = getattr(handle, name)
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = handle
        return _lib


def strerror(rc):
    return lib().spw_strerror(rc).decode("utf-8", "replace")


def op_schema():
    """The op registry as the library describes it (pipeline/op_schema.h): {"schema": 1, "ops": [...]}."""
    import json
    handle = lib()
    p = handle.spw_op_schema()
    if not p:
        raise MemoryError("spillway: no memory for the op schema")
    try:
        return json.loads(ctypes.string_at(p).decode("utf-8"))
    finally:
        handle.spw_free(p)
