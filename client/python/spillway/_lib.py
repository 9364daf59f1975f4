# spillway/_lib.py - ctypes declarations for libspillway.so (client/include/spillway/client.h, its flat face
# for bindings): loaded once, on first use, from the package's own folder (an installed package or wheel
# carries it), else $SPILLWAY_LIB, else <repo>/build/lib/libspillway.so (a source checkout); and the
# library's log lines routed to Python's logging (loggers spillway.<component>) unless SPILLWAY_LOG_TO=stderr.
# Not an API of its own: loader.py and pipeline.py (the op schema) are its users. Thread model: ctypes releases
# the GIL in every call; the C rules apply (one thread drives a job; loading is guarded by a lock); log lines
# arrive on any library thread, which takes the GIL for each.
import atexit
import ctypes
import logging
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
    "spw_job_rest_of": (_I, [_P, ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int64),
                             ctypes.POINTER(ctypes.c_int64)]),
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
    "spw_set_log_callback": (_I, [_P, _P]),
    "spw_set_log_level": (_I, [_I]),
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
            _hook_logs(handle)
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


# ---- log lines: libspillway's lines (client.h, spw_set_log_callback) as logging records ----

# enum spw_log_level (debug, info, warn, error) -> logging's levels
_LOG_LEVELS = (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR)
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_void_p)
_hooked = None          # the library whose lines come here (its callback is set)
_handler_broke = False  # a logging handler raised once: said on stderr, once
lines_crossed = 0       # lines the library handed to Python (not atomic: a rough count, for tests)


def log_destination():
    """Where the library's lines go: "logging" (the default) or "stderr" ($SPILLWAY_LOG_TO, ValueError
    naming any other value)."""
    to = os.environ.get("SPILLWAY_LOG_TO", "") or "logging"
    if to not in ("logging", "stderr"):
        raise ValueError("spillway: SPILLWAY_LOG_TO=%r: \"logging\" (the default: Python's logging, loggers "
                         "spillway.<component>) or \"stderr\" (the library writes its lines there itself)" % to)
    return to


def _on_line(level, component, msg, user):
    """The C callback: one library line as a record of logger spillway.<component>. It runs on a library
    thread, so nothing may escape it (ctypes would only print it): a handler that raises gets the line
    written to stderr instead."""
    global lines_crossed
    lines_crossed += 1
    try:
        name = "spillway." + (component.decode("utf-8", "replace") if component else "lib")
        pylevel = _LOG_LEVELS[level] if 0 <= level < len(_LOG_LEVELS) else logging.ERROR
        logger = logging.getLogger(name)
        if logger.isEnabledFor(pylevel):
            text = msg.decode("utf-8", "replace") if msg else ""
            logger.handle(logger.makeRecord(name, pylevel, "libspillway", 0, text, None, None))
    except BaseException as e:      # a KeyboardInterrupt too: it cannot cross the C frames
        _handler_failed(level, component, msg, e)


_on_line_c = _LOG_FN(_on_line)     # kept alive as long as the module: the library holds its address


def _handler_failed(level, component, msg, exc):
    global _handler_broke
    try:
        if isinstance(exc, KeyboardInterrupt):
            import _thread
            _thread.interrupt_main()    # raised again in the main thread once the C call returns
        note = b""
        if not _handler_broke:
            _handler_broke = True
            note = ("spillway: a logging handler raised %s: %s; this and later lines it fails on go to stderr\n"
                    % (type(exc).__name__, exc)).encode("utf-8", "replace")
        name = ("debug", "info", "warn", "error")[level] if 0 <= level < 4 else "error"
        os.write(2, note + b"%s %s %s\n" % (name.encode(), component or b"", msg or b""))
    except BaseException:   # stderr closed, or the interpreter going down: the line is lost
        pass


def _c_level():
    """The library's level from the loggers': the lowest effective level of logger "spillway" and of any
    spillway.<component> logger that exists, so that only lines some logger takes cross into Python."""
    levels = [logging.getLogger("spillway").getEffectiveLevel()]
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith("spillway.") and isinstance(logger, logging.Logger):
            levels.append(logger.getEffectiveLevel())
    lowest = min(levels)
    for c_level, pylevel in enumerate(_LOG_LEVELS):
        if lowest <= pylevel:
            return c_level
    return len(_LOG_LEVELS) - 1     # above ERROR (CRITICAL): error lines still cross, and are dropped there


def sync_log_level():
    """Set the library's level from the loggers' (loader.py calls it as each job starts: a logger's level
    set later counts from the next Loader). Nothing with SPILLWAY_LOG_TO=stderr, where
    $SPILLWAY_LOG_LEVEL decides."""
    if _hooked is not None:
        _hooked.spw_set_log_level(_c_level())


def _hook_logs(handle):
    global _hooked
    if log_destination() != "logging":
        return
    rc = handle.spw_set_log_callback(ctypes.cast(_on_line_c, ctypes.c_void_p), None)
    if rc == 0:
        _hooked = handle
        sync_log_level()


@atexit.register
def _unhook_logs():
    """Lines logged after the interpreter starts going down must not reach Python: the callback goes before
    ctypes and logging do (registered when this module loads, so it runs after loader.py's _destroy_all has
    stopped the jobs, whose last lines still reach logging). Once it returns no library thread is inside
    _on_line, and later lines go to stderr."""
    global _hooked
    if _hooked is not None:
        handle, _hooked = _hooked, None
        handle.spw_set_log_callback(None, None)
