# spillway/loader.py - Loader: runs a pipeline as a libspillway job (in this process, or through a
# dispatcher and workers) and yields its batches as numpy arrays that view the C batch's memory (no copy);
# a batch goes back to the library when its last array dies. A job cannot cross fork(): use in a child raises.
# Thread model: one thread iterates a Loader (the C rule); arrays and batches may die on any thread (their
# release is locked); the job is destroyed when it is closed and its last batch is gone.
import atexit
import collections
import ctypes
import hashlib
import json
import os
import sys
import threading
import weakref

import numpy as np

from . import _lib
from .dlpack import DeviceTensor
from .pipeline import Pipeline

# Every error about crossing processes ends with this advice (tests and users may match on it).
FORK_MESSAGE = (
    "Use Spillway's own loader instead of DataLoader worker processes: iterate the Loader (or "
    "spillway.torch.SpillwayDataset) directly, or DataLoader(..., num_workers=0); it already runs the "
    "pipeline in parallel on its own threads (local_cores) and on the service's workers.")


class SpillwayError(RuntimeError):
    """An error from libspillway: str() is its message, .code its return code (lib/err.h or -errno)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class SpecError(SpillwayError, ValueError):
    """The pipeline spec was refused by the C validator (SPW_ESPEC); the message names the field."""


class ForkedError(SpillwayError):
    """A Loader used in a process other than the one that created it (FORK_MESSAGE)."""

    def __init__(self, message, code=_lib.SPW_EFORKED):
        super().__init__(message, code)


def _forked(parent, detail=None):
    return ForkedError(
        "spillway: this Loader was created in process %d and used in process %d, a fork (such as a torch "
        "DataLoader worker with num_workers > 0); a Spillway job cannot cross fork()%s. %s"
        % (parent, os.getpid(), " (libspillway: %s)" % detail if detail else "", FORK_MESSAGE))


def _error(rc, message):
    cls = SpecError if rc == _lib.SPW_ESPEC else SpillwayError
    return cls(message or _lib.strerror(rc), rc)


Key = collections.namedtuple("Key", "epoch sample path")
Key.__doc__ = "Which sample an element is: its epoch, its index in the source's manifest, and its path."


class _Job:
    """Owns a struct spw_job *: counts the batches out, destroys the job once closed with none out."""

    def __init__(self, text, opts):
        self.ptr = None
        self.pid = os.getpid()
        self.out = 0                    # batches taken and not yet released
        self.closed = False
        self.lock = threading.RLock()   # re-entrant: a batch's __del__ may run inside a locked section (GC)
        L = _lib.lib()
        _lib.sync_log_level()           # the loggers' levels now: lines no logger takes stay in C
        o = L.spw_job_opts_new()
        if not o:
            raise MemoryError("spw_job_opts_new")
        try:
            for key, values in opts.items():
                for value in values if isinstance(values, list) else [values]:     # a list: set once each
                    rc = L.spw_job_opts_set(o, key.encode(), value.encode())
                    if rc:
                        raise ValueError("spillway: option %s=%r: %s" % (
                            key, value, "unknown option" if rc == -_lib.ENOENT else "invalid value"))
            err = ctypes.create_string_buffer(1024)
            job = ctypes.c_void_p()
            # Created on a helper thread, so that Ctrl-C (or a signal handler's exception) reaches this one while
            # the C call waits for a dispatcher: the flag then stops the wait within 100 ms. The job keeps
            # looking at the flag (spw_job_next), so it lives as long as the job.
            self.cancel = ctypes.c_int(0)
            L.spw_job_opts_cancel_flag(o, ctypes.byref(self.cancel))
            result = []
            t = threading.Thread(target=lambda: result.append(L.spw_job_create_json(
                text.encode(), o, ctypes.byref(job), err, len(err))), name="spillway-create", daemon=True)
            t.start()
            try:
                while t.is_alive():
                    t.join(0.1)
            except BaseException:
                self.cancel.value = 1
                t.join()
                if result and result[0] == 0 and job.value:
                    L.spw_job_destroy(job.value)
                raise
            rc = result[0] if result else -_lib.EINVAL
        finally:
            L.spw_job_opts_free(o)
        if rc:
            raise _error(rc, err.value.decode("utf-8", "replace"))
        self.ptr = job.value
        _jobs.add(self)

    def next(self):
        """The next struct spw_batch * (counted out), or None after the last one."""
        if self.ptr is None:
            raise SpillwayError("spillway: the job is closed", _lib.SPW_ECLOSED)
        bp = ctypes.c_void_p()
        rc = _lib.lib().spw_job_next(self.ptr, ctypes.byref(bp))
        if rc == _lib.SPW_ECLOSED:
            return None
        if rc == _lib.SPW_EFORKED:
            raise _forked(self.pid, self.errmsg())
        if rc:
            raise _error(rc, self.errmsg())
        with self.lock:
            self.out += 1
        return bp.value

    def errmsg(self):
        return _lib.lib().spw_job_errmsg(self.ptr).decode("utf-8", "replace")

    def release(self, bp):
        with self.lock:
            if self.ptr is not None and os.getpid() == self.pid:
                _lib.lib().spw_job_release(self.ptr, bp)
            self.out -= 1
            if self.closed and self.out == 0:
                self.destroy()

    def close(self):
        """Stop the job now; free it now, or once the last batch still out is released."""
        with self.lock:
            self.closed = True
            if self.out == 0:
                self.destroy()
            elif self.ptr is not None and os.getpid() == self.pid:
                _lib.lib().spw_job_stop(self.ptr)   # its threads and streams end; the batches stay valid

    def destroy(self):
        """Free the job now (batches still out then leak their small struct; their data stays valid)."""
        with self.lock:
            if self.ptr is not None and os.getpid() == self.pid:   # a child must not touch the parent's job
                _lib.lib().spw_job_destroy(self.ptr)
            self.ptr = None

    def __del__(self):                  # reached only with no batch out: each batch holds its job
        try:
            self.destroy()
        except Exception:               # interpreter shutdown
            pass


_jobs = weakref.WeakSet()


@atexit.register
def _destroy_all():
    """Stop every job's threads before the interpreter and the C runtime go down."""
    for job in list(_jobs):
        job.destroy()


class _BatchOwner:
    """One C batch: released when the last array viewing it (and the Batch) is gone."""
    __slots__ = ("job", "ptr", "addresses", "__weakref__")

    def __init__(self, job, ptr):
        self.job, self.ptr, self.addresses = job, ptr, []

    def __del__(self):
        try:
            self.job.release(self.ptr)
        except Exception:               # interpreter shutdown
            pass


class _View:
    """An __array_interface__ over C memory; numpy keeps it as the array's base, and it keeps the owner."""
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, owner, address, shape, typestr):
        self.owner = owner
        self.__array_interface__ = {"data": (address, False), "shape": shape, "typestr": typestr, "version": 3}


class Batch(tuple):
    """The batch's tensors as a tuple, each a named part (.names): (data, labels), or (data, labels, lengths)
    for a padded audio batch: arrays [n, ...], int64 [n] and int64 [n] (valid samples or frames of each
    row), or (data, labels, shapes) for a padded image batch (shapes int64 [n, ndim]; .images crops them);
    with views, (view_0, ..., view_k-1, labels): one array per view instance, in order (.views lists them;
    .data is that list). batch["labels"] (any part by name) as well as batch[1]. They view the library's
    memory: they stay valid while referenced, and the batch goes back to the library when all of them (and
    this object) are gone. .keys lists each element's Key(epoch, sample, path)."""

    def __new__(cls, arrays=(), owner=None, n_views=0, names=None, fields=None):
        b = tuple.__new__(cls, arrays)
        b._owner = owner
        b._keys = None
        b._n_views = n_views
        b._names = tuple(names) if names is not None else ()
        b._fields = fields or {}        # source.fields: name -> "text" | "raw" | "mask" | "boxes"
        b._decoded = {}
        return b

    @property
    def names(self):
        """The parts' names in tuple order: "data", "labels", "lengths" or "shapes", "view0" ..."""
        return list(self._names)

    def __getitem__(self, key):
        if isinstance(key, str) and self._fields.get(key) in ("text", "raw", "boxes") and key in self._names:
            if key not in self._decoded:
                self._decoded[key] = self._field_list(key)
            return self._decoded[key]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names.index(key))
            except ValueError:
                raise KeyError("batch: no part %r (it has %s)" % (key, ", ".join(self._names))) from None
        return tuple.__getitem__(self, key)

    def get(self, name, default=None):
        """The part called name, or default when the batch has none."""
        return self[name] if name in self._names else default

    def __contains__(self, item):
        if isinstance(item, str):
            return item in self._names
        return tuple.__contains__(self, item)

    def _field_list(self, name):
        """A source field per element: str for text, bytes for raw (from its padded bytes and lengths); for
        boxes, each element's [k, 4] array (x0, y0, x1, y1)."""
        data = tuple.__getitem__(self, self._names.index(name))
        counts = self[name + ("_counts" if self._fields[name] == "boxes" else "_lengths")]
        counts = counts.tolist()
        if self._fields[name] == "boxes":
            return [data[i, :n] for i, n in enumerate(counts)]
        data = data.numpy() if hasattr(data, "numpy") else data
        rows = [data[i, :n].tobytes() for i, n in enumerate(counts)]
        return [r.decode("utf-8") for r in rows] if self._fields[name] == "text" else rows

    @property
    def targets(self):
        """Detection targets as torchvision's detection models take them: per element a dict {"boxes": [k, 4]
        x0 y0 x1 y1 float32, "labels": [k] int64} from the first boxes field; None without boxes."""
        boxes = next((n for n, kind in self._fields.items() if kind == "boxes" and n in self._names), None)
        if boxes is None:
            return None
        labels, counts = self[boxes + "_labels"], self[boxes + "_counts"].tolist()
        return [{"boxes": b, "labels": labels[i, :n]} for i, (b, n) in enumerate(zip(self[boxes], counts))]

    @property
    def fields(self):
        """The source's fields (source.fields) by name: {"caption": [str, ...], "mask": array [n, H, W],
        "boxes": [array [k, 4], ...]}."""
        return {name: self[name] for name in self._fields if name in self._names}

    @property
    def views(self):
        """The view instances' arrays, in order (a spec with "views"), else None."""
        return list(self[:self._n_views]) if self._n_views else None

    @property
    def data(self):
        """The data array; with views, the list of view arrays (as DINO's collate gives the crops)."""
        return self.views if self._n_views else self["data"]

    @property
    def labels(self):
        """The labels, or None for a batch without them."""
        return self.get("labels")

    @property
    def lengths(self):
        """The lengths of a padded audio batch, else None."""
        return self.get("lengths")

    @property
    def images(self):
        """Each element's data without its padding: for a padded image batch (batch.pad: images of different
        sizes, zero-padded at the end of each dimension, with "shapes" int64 [n, ndim]) the element's own
        region, as torchvision's detection models take a list of images; else the rows of the data. Views
        of the batch's memory."""
        data = self["data"]
        shapes = self.get("shapes")
        if shapes is None:
            return [data[i] for i in range(self.n)]
        return [data[i][tuple(slice(0, int(d)) for d in s)] for i, s in enumerate(shapes.tolist())]

    @property
    def n(self):
        """Elements in the batch."""
        return int(self[0].shape[0])

    @property
    def keys(self):
        if self._keys is None:
            self._keys = _read_keys(self._owner) if self._owner is not None else []
        return self._keys

    @property
    def epoch(self):
        """The epoch the batch belongs to (a batch never spans two)."""
        return self._position()[0]

    @property
    def index(self):
        """The batch's index within its epoch (this rank's batches: 0 .. len(loader) - 1)."""
        return self._position()[1]

    def _position(self):
        if self._owner is None:
            return None, None
        epoch, index = ctypes.c_int64(), ctypes.c_int64()
        if _lib.lib().spw_batch_position(self._owner.ptr, ctypes.byref(epoch), ctypes.byref(index)):
            raise SpillwayError("spw_batch_position", -_lib.EINVAL)
        return epoch.value, index.value

    def with_tensors(self, tensors):
        """The same batch (keys, lifetime) over other tensors, e.g. torch views of these arrays."""
        b = Batch(tensors, self._owner, self._n_views, self._names, self._fields)
        b._keys = self._keys
        return b

    def __reduce__(self):               # pickles (and copies) as a plain tuple of its arrays
        return (tuple, (tuple(self),))


def _read_keys(owner, limit=None):
    L = _lib.lib()
    epoch, sample, path = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_char_p()
    keys = []
    n = L.spw_batch_elements(owner.ptr)
    for i in range(n if limit is None else min(n, limit)):
        if L.spw_batch_key_at(owner.ptr, i, ctypes.byref(epoch), ctypes.byref(sample), ctypes.byref(path)):
            raise SpillwayError("spw_batch_key_at(%d)" % i, -_lib.EINVAL)
        keys.append(Key(epoch.value, sample.value, os.fsdecode(path.value) if path.value else ""))
    return keys


def _field_kinds(spec_text):
    """source.fields of a spec's JSON: {name: "text" | "raw" | "mask" | "boxes"} in order."""
    try:
        source = json.loads(spec_text).get("source", {})
        fields = source.get("fields") or ({"boxes": {"as": "boxes"}} if source.get("format") == "coco" else {})
    except (ValueError, AttributeError):
        return {}                       # the C parser says what is wrong with it
    return {name: (f.get("as", "text") if isinstance(f, dict) else "text") for name, f in fields.items()}


def _make_batch(job, bp, device_batches=False, fields=None):
    """A Batch of numpy views; with device_batches its data is a DeviceTensor (DLPack) wherever it is."""
    owner = _BatchOwner(job, bp)        # from here on the owner releases it, whatever happens
    L = _lib.lib()
    dtype, ndim, data, nbytes = ctypes.c_int(), ctypes.c_int(), ctypes.c_void_p(), ctypes.c_size_t()
    dev_type, dev_id = ctypes.c_int(), ctypes.c_int()
    shape = (ctypes.c_int64 * _lib.TENSOR_MAX_DIMS)()
    arrays, names = [], []
    for i in range(L.spw_batch_tensor_count(bp)):
        names.append(L.spw_batch_tensor_name(bp, i).decode())
        rc = L.spw_batch_tensor_at(bp, i, ctypes.byref(dtype), ctypes.byref(ndim), shape, ctypes.byref(data),
                                   ctypes.byref(nbytes))
        if rc:
            raise SpillwayError("spw_batch_tensor_at(%d): %s" % (i, _lib.strerror(rc)), rc)
        shp = tuple(shape[:ndim.value])
        typestr = _lib.DTYPES[dtype.value]
        dt = np.dtype(typestr)
        if int(np.prod(shp, dtype=np.int64)) * dt.itemsize != nbytes.value:
            raise SpillwayError("tensor %d: %d bytes for shape %s %s" % (i, nbytes.value, shp, dt),
                                -_lib.EINVAL)
        if i == 0 and device_batches:
            if L.spw_batch_device(bp, i, ctypes.byref(dev_type), ctypes.byref(dev_id)):
                raise SpillwayError("spw_batch_device(%d)" % i, -_lib.EINVAL)
            arrays.append(DeviceTensor(owner, i, shp, dt.name, (dev_type.value, dev_id.value)))
            owner.addresses.append(data.value)
            continue
        if nbytes.value == 0:
            arrays.append(np.zeros(shp, dt))
            owner.addresses.append(0)
            continue
        arrays.append(np.asarray(_View(owner, data.value, shp, typestr)))
        owner.addresses.append(data.value)
    return Batch(arrays, owner, L.spw_batch_view_count(bp), names, fields)


def _spec_text(pipeline):
    if isinstance(pipeline, Pipeline):
        return pipeline.to_json()
    if isinstance(pipeline, dict):
        return json.dumps(pipeline)
    if isinstance(pipeline, (str, bytes)):
        return pipeline.decode() if isinstance(pipeline, bytes) else pipeline
    raise TypeError("pipeline: a Pipeline, a spec dict or JSON text, got %s" % type(pipeline).__name__)


def _python_op_env():
    """Python ops in this process run in helpers of this interpreter with this process's module path, unless
    SPILLWAY_PYTHON / SPILLWAY_PYTHONPATH say otherwise (read by the C library when a helper starts)."""
    os.environ.setdefault("SPILLWAY_PYTHON", sys.executable)
    os.environ.setdefault("SPILLWAY_PYTHONPATH", os.pathsep.join(os.path.abspath(p or ".") for p in sys.path))


def _env_token():
    """The token from $SPILLWAY_AUTH_TOKEN, or the file $SPILLWAY_AUTH_TOKEN_FILE names (a mounted Secret)."""
    if os.environ.get("SPILLWAY_AUTH_TOKEN"):
        return os.environ["SPILLWAY_AUTH_TOKEN"]
    path = os.environ.get("SPILLWAY_AUTH_TOKEN_FILE")
    if not path:
        return None
    with open(path, encoding="utf-8") as f:
        token = f.read(4097).rstrip()
    if not token or len(token) > 4096:
        raise SpillwayError("SPILLWAY_AUTH_TOKEN_FILE %s: %s" % (path, "empty" if not token else "too big"))
    return token


def _torchrun_job_name():
    """torchrun's run id (TORCHELASTIC_RUN_ID, the same on every rank of one launch) as a job name, or None
    where there is none (or it is torchrun's placeholder "none", shared by unrelated launches)."""
    run = os.environ.get("TORCHELASTIC_RUN_ID", "")
    if not run or run == "none":
        return None
    return ("torchrun-" + "".join(c if c.isascii() and (c.isalnum() or c in "._:-") else "_" for c in run))[:128]


def _spec_changes(old_text, new_text, most=5):
    """What differs between two specs' JSON texts, as "batch.size: 12 -> 10; ops[2] added (...)"."""
    out = []

    def walk(a, b, path):
        if len(out) > most:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in list(a) + [k for k in b if k not in a]:
                walk(a.get(k, _MISSING), b.get(k, _MISSING), "%s.%s" % (path, k) if path else k)
        elif isinstance(a, list) and isinstance(b, list):
            for i in range(max(len(a), len(b))):
                walk(a[i] if i < len(a) else _MISSING, b[i] if i < len(b) else _MISSING, "%s[%d]" % (path, i))
        elif a != b:
            show = lambda v: "(none)" if v is _MISSING else json.dumps(v)[:80]
            out.append("%s: %s -> %s" % (path or "the spec", show(a), show(b)))
    try:
        walk(json.loads(old_text), json.loads(new_text), "")
    except ValueError:
        return "the state's spec is not JSON"
    if not out:
        return "the same fields, written differently"
    return "; ".join(out[:most]) + (" and more" if len(out) > most else "")


_MISSING = object()


class Loader:
    """Iterate a pipeline's batches (spillway.Batch: (data, labels[, lengths]) numpy views, no copy).

    The job is created here, eagerly: a bad spec, source or dispatcher raises at construction (SpecError for
    the spec, with the C validator's message naming the field), and len() and classes work before the first
    batch. The job runs the spec's epochs (source.epochs; 0, Pipeline's epochs=None, = as many as iterated)
    as one stream, shuffled anew each epoch; each iteration of the Loader is the next epoch, as with a torch
    DataLoader (`for epoch in range(E): for data, labels in loader`), and len() is batches per epoch. A
    break ends the epoch: the next iteration starts the next epoch, and the rest of the broken one is not
    produced (a `limit_train_batches`-style loop). set_epoch(e) makes the next iteration epoch e (ahead or
    back). Iterating once more after the last epoch raises SpillwayError (never a silently empty epoch);
    batches() is the whole stream in one loop. A batch is never empty: one whose samples were all skipped
    (on_error: skip) is passed over.

    dispatcher: "HOST:PORT" runs the job through the service; None: $SPILLWAY_DISPATCHER (as spillctl; the
    deployment's ConfigMap sets it), else in this process; "": in this process.
    local_cores: this process's threads (in-process default: all CPUs; with a dispatcher 1).
    cut: with a dispatcher, what runs on the workers: None (the default: $SPILLWAY_CUT, else planned), "auto"
    (planned: the dispatcher profiles this client and the workers and picks the cut and this process's share,
    or runs the job here alone when offloading does not pay), "all" (every fusion group), or K (groups [0, K)).
    compress: with a dispatcher, "zstd" or "zstd:N" (N in 1..19): workers send element payloads compressed, each
    element its own frame, checked here before use (for slow links); "off"; None/"auto": as the plan says.
    ordered: with a dispatcher, deliver batches in epoch order (as in-process); else any complete one first.
    max_workers, trainer_rate (elements/s, for planning), prefetch_bytes, credit_bytes, split_size,
    auth_token, max_batches, dispatcher_wait_ms: as struct spw_job_opts (client.h); auth_token defaults to
    $SPILLWAY_AUTH_TOKEN or the contents of the file $SPILLWAY_AUTH_TOKEN_FILE names.
    tls_ca, tls_cert, tls_key: PEM files for TLS to the dispatcher and workers (the CA their certificates are
    signed by; this client's certificate and key under mutual TLS); default $SPILLWAY_TLS_CA, _CERT, _KEY.
    insecure: send auth_token without TLS, in the clear (default: $SPILLWAY_INSECURE is 1, true or yes);
    without it a token with no tls_ca is refused.
    rank, world_size: data-parallel trainers (default: the RANK and WORLD_SIZE environment variables, as
    torch.distributed sets them; else one trainer): each rank gets its own share of every epoch, disjoint from
    the other ranks', with as many batches (short shares pad, or drop with batch(drop_remainder=True)).
    job_name: with a dispatcher, the ranks giving the same name share one job and its workers (required with
    world_size > 1; default $SPILLWAY_JOB_NAME, else torchrun's run id as "torchrun-<TORCHELASTIC_RUN_ID>").
    gpu, gpu_mem_budget: in-process, one more thread makes micro-batches of 4 on this CUDA device (the
    trainer's own GPU: FusionFlow's CPU+GPU split), within a memory budget reserved once (bytes such as "2Gi",
    or a fraction of the memory free then; default "0.25"). GPU-made elements equal the CPU's byte for byte.
    Without the CUDA plugin, a driver or the device the job says why on stderr and runs on the CPU.
    device_batches: with gpu, each batch's data stays on the device: Batch.data is a DeviceTensor for
    torch.from_dlpack (no copy; spillway.torch does it); the rows the CPU made are uploaded into it. A batch
    that finds no room in the budget, and every batch after a device error, is a DeviceTensor in host memory.
    resume: a state_dict() taken earlier (by this or another process): the job delivers exactly the samples
    not yet delivered when it was taken, then continues. Through a dispatcher the resumed loader rejoins the
    job it was taken in while that is unfinished (the other ranks keep going), else starts a new one there.
    Onto another world size (elastic training): every old rank's state_dict() as a list in rank order (taken
    at the same step, e.g. gathered with torch.distributed.all_gather_object); the samples of the epoch in
    progress that no old rank delivered are divided among the new ranks (their shares padded to equal batch
    counts, or dropped with drop_remainder) and made in this process, that epoch's iteration being shorter;
    then the run goes on at the new size (through a dispatcher as a job named job_name-wN). A list of the
    same world size gives each rank its own state.

    keep_job: through a dispatcher, close() leaves an unfinished job paused for a resume instead of ending it
    (state_dict() asks for that too); a paused job stays rejoinable for the dispatcher's --paused-job-ms.

    A Loader (and its arrays) cannot be used in a forked child: that raises ForkedError (a RuntimeError).
    close() (or `with`, or the end of the process) stops the job - through a dispatcher it ends there (its
    workers freed) unless kept; it is freed when the last batch still referenced is gone.
    """

    def __init__(self, pipeline, dispatcher=None, local_cores=None, cut=None, ordered=False, max_workers=None,
                 trainer_rate=None, prefetch_bytes=None, auth_token=None, max_batches=None, credit_bytes=None,
                 split_size=None, rank=None, world_size=None, resume=None, job_name=None,
                 dispatcher_wait_ms=None, tls_ca=None, tls_cert=None, tls_key=None, insecure=None, gpu=None,
                 gpu_mem_budget=None, device_batches=False, compress=None, keep_job=False):
        self._pid = os.getpid()
        self._job = None
        if dispatcher is None:
            dispatcher = os.environ.get("SPILLWAY_DISPATCHER")
        dispatcher = dispatcher or None     # "": in this process, whatever the environment says
        self._done = False
        self._pending = None            # the first batch of the next epoch, taken while ending this one
        self._cur = None                # the epoch being iterated
        self._open = False              # an iteration of _cur was broken off: the next one skips its rest
        self._next_epoch = None         # set_epoch's choice for the next iteration
        self._classes = None
        self.spec = _spec_text(pipeline)
        self._fields = _field_kinds(self.spec)
        _python_op_env()
        if insecure is None:
            insecure = os.environ.get("SPILLWAY_INSECURE", "").lower() in ("1", "true", "yes")
        if device_batches and gpu is None:
            raise ValueError("spillway: device_batches needs gpu (the device to hand batches over on)")
        self._device_batches = bool(device_batches)
        opts = {"ordered": "1" if ordered else "0", "insecure": "1" if insecure else "0",
                "device_batches": "1" if device_batches else "0", "keep_job": "1" if keep_job else "0"}
        if world_size is None and "WORLD_SIZE" in os.environ:
            world_size, rank = int(os.environ["WORLD_SIZE"]), int(os.environ.get("RANK", "0"))
        self.rank, self.world_size = rank or 0, world_size or 1
        if job_name is None:
            job_name = os.environ.get("SPILLWAY_JOB_NAME") or _torchrun_job_name()
        if auth_token is None:
            auth_token = _env_token()
        for key, value in (("dispatcher", dispatcher), ("auth_token", auth_token), ("job_name", job_name),
                           ("local_cores", local_cores),
                           ("cut", cut), ("compress", compress), ("max_workers", max_workers), ("trainer_rate", trainer_rate),
                           ("prefetch_bytes", prefetch_bytes), ("credit_bytes", credit_bytes),
                           ("split_size", split_size), ("max_batches", max_batches), ("rank", rank),
                           ("world_size", world_size), ("dispatcher_wait_ms", dispatcher_wait_ms),
                           ("gpu", gpu), ("gpu_mem_budget", gpu_mem_budget),
                           ("tls_ca", tls_ca or os.environ.get("SPILLWAY_TLS_CA")),
                           ("tls_cert", tls_cert or os.environ.get("SPILLWAY_TLS_CERT")),
                           ("tls_key", tls_key or os.environ.get("SPILLWAY_TLS_KEY"))):
            if value is not None:
                opts[key] = value if isinstance(value, str) else repr(value)
        self._opts = opts
        self._rest = None               # after a world size change: the rest job's facts (_start)
        self._suffixed = False          # the job is named job_name-wN (after a world size change)
        self._given = 0                 # batches taken from the jobs so far: max_batches counts them
        self._start(self._resume_opts(resume))

    def _start(self, opts):
        """Make the job of opts; a rest of an epoch after a world size change says where the run goes on."""
        self._first = int(opts.get("resume_batches", 0))    # the first job's first batch
        self._job = _Job(self.spec, opts)
        epoch, after, per_epoch = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        self._rest = None
        if _lib.lib().spw_job_rest_of(self._job.ptr, ctypes.byref(epoch), ctypes.byref(after),
                                      ctypes.byref(per_epoch)):
            self._rest = {"epoch": epoch.value, "next": after.value, "per_epoch": per_epoch.value,
                          "ranks": opts["rest_of_rank"]}

    def _after_rest(self, batch):
        """Leave the rest of an epoch for the run at the new world size from `batch` on (a job of its own
        there: through a dispatcher named job_name-wN, as the old ranks' job may still be paused)."""
        rest, self._rest = self._rest, None
        opts = dict(self._opts)
        if opts.get("job_name"):
            opts["job_name"], self._suffixed = self._renamed(opts["job_name"]), True
        if batch:
            opts.update(resume_batches=str(batch), resume_manifest=rest["ranks"][0].split()[1],
                        resume_split_size=rest["ranks"][0].split()[2])
        limit = self._opts.get("max_batches")
        self._job.close()
        if limit is not None and int(limit) <= self._given:
            self._done = True
            return False
        if limit is not None:
            opts["max_batches"] = str(int(limit) - self._given)
        self._done = False
        self._first = batch
        self._job = _Job(self.spec, opts)
        return True

    def _renamed(self, name):
        suffix = "-w%d" % self.world_size
        return name if name.endswith(suffix) else name[:128 - len(suffix)] + suffix

    STATE_VERSION = 2

    def _resume_opts(self, state):
        opts = dict(self._opts)
        if state is None:
            return opts
        states = list(state) if isinstance(state, (list, tuple)) else [state]
        for i, one in enumerate(states):
            if not isinstance(one, dict) or one.get("version") not in (1, self.STATE_VERSION):   # 1: in-process
                raise ValueError("spillway: resume: not a Loader state (version %r)" % (
                    one.get("version") if isinstance(one, dict) else type(one).__name__))
            if len(states) > 1 and (one.get("rank"), one.get("world_size")) != (i, len(states)):
                raise ValueError("spillway: resume: a list of states is every rank's, in rank order: item %d is "
                                 "rank %r of %r" % (i, one.get("rank"), one.get("world_size")))
        if len(states) > 1 and len(states) == self.world_size:
            states = [states[self.rank]]
        if len(states) > 1:
            return self._rest_opts(states, opts)
        state = states[0]
        if state.get("rest_of"):
            return self._rest_opts(state["rest_of"], opts, state)
        if state.get("world_size") != self.world_size and state.get("spec_sha256") == self._spec_digest():
            raise ValueError("spillway: resume: the state is for another world_size (%r, this loader %r): to "
                             "resume onto another world size, give every old rank's state_dict() as a list in "
                             "rank order (resume=[state_of_rank_0, state_of_rank_1, ...])"
                             % (state.get("world_size"), self.world_size))
        if state.get("job_name") and opts.get("job_name"):
            opts["job_name"], self._suffixed = self._renamed(opts["job_name"]), True
        mine = {"spec_sha256": self._spec_digest(), "rank": self.rank, "world_size": self.world_size}
        for key, value in mine.items():
            if state.get(key) == value:
                continue
            if key == "spec_sha256" and isinstance(state.get("spec"), str):
                raise ValueError("spillway: resume: the state is for another spec: %s"
                                 % _spec_changes(state["spec"], self.spec))
            raise ValueError("spillway: resume: the state is for another %s (%r, this loader %r)" % (
                key.replace("_sha256", ""), state.get(key), value))
        opts["resume_batches"] = str(int(state["batches"]))
        opts["resume_manifest"] = state["manifest"]
        for key in ("job", "job_secret", "split_size", "places"):
            if state.get(key):
                opts["resume_" + key] = str(state[key])
        return opts

    def _rest_opts(self, states, opts, rest_state=None):
        """A world size change: the rest of the old ranks' epoch, this rank's share, made in this process; then
        the run at this world size (_after_rest). rest_state: a state taken during such a rest, resumed at the
        same world size."""
        if isinstance(states[0], str):          # a rest state's own record of the old ranks
            ranks = list(states)
        else:
            for one in states:
                if one.get("spec_sha256") != self._spec_digest():
                    raise ValueError("spillway: resume: rank %r's state is for another spec: %s" % (
                        one.get("rank"), _spec_changes(one["spec"], self.spec) if isinstance(one.get("spec"), str)
                        else "its digest differs"))
                if one.get("rest_of"):
                    raise ValueError("spillway: resume: rank %r's state was taken in the rest of an epoch after a "
                                     "world size change: resume it on %r ranks, or change the world size again at "
                                     "an epoch's end" % (one.get("rank"), one.get("world_size")))
            ranks = ["%d %s %d %s" % (int(one["batches"]), one.get("manifest") or "0", int(one.get("split_size") or 0),
                                      one.get("places") or "") for one in states]
        if rest_state is not None:
            if rest_state.get("spec_sha256") != self._spec_digest():
                raise ValueError("spillway: resume: the state is for another spec: %s" % (
                    _spec_changes(rest_state["spec"], self.spec) if isinstance(rest_state.get("spec"), str)
                    else "its digest differs"))
            if (rest_state.get("rank"), rest_state.get("world_size")) != (self.rank, self.world_size):
                raise ValueError("spillway: resume: the state was taken in the rest of an epoch after a world size "
                                 "change, as rank %r of %r: resume it as that rank (this loader: %r of %r)" % (
                                     rest_state.get("rank"), rest_state.get("world_size"), self.rank,
                                     self.world_size))
            opts["resume_batches"] = str(int(rest_state["batches"]))
        opts["rest_of_rank"] = ranks
        return opts

    def _spec_digest(self):
        return hashlib.sha256(self.spec.encode()).hexdigest()

    def state_dict(self):
        """What was delivered so far, as a small dict to save with the model (torch.save takes it): a new
        Loader(..., resume=state) or load_state_dict(state) goes on from the next batch, exactly once."""
        self._check()
        L = _lib.lib()
        mine = {"version": self.STATE_VERSION, "spec_sha256": self._spec_digest(), "spec": self.spec,
                "rank": self.rank, "world_size": self.world_size}
        batches, manifest, job, split = ctypes.c_int64(), ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_int()
        secret = ctypes.c_uint64()
        hexp = L.spw_job_checkpoint_flat(self._job.ptr, ctypes.byref(batches), ctypes.byref(manifest),
                                         ctypes.byref(job), ctypes.byref(secret), ctypes.byref(split))
        if not hexp:
            raise MemoryError("spillway: state_dict: out of memory")
        places = ctypes.string_at(hexp).decode()
        L.spw_free(hexp)
        n = batches.value
        if self._rest is not None:      # the rest of an epoch: its old ranks and how far it went
            return dict(mine, batches=n, rest_of=list(self._rest["ranks"]), manifest="%016x" % manifest.value)
        if self._pending is not None:
            # Taken from the library but not given to the trainer: the next epoch's first batch (a later
            # epoch starts only once this one is all delivered), so the state is the epoch's start.
            n, places = n - 1, ""
        state = dict(mine, batches=n, manifest="%016x" % manifest.value, job=job.value,
                     job_secret="%016x" % secret.value if job.value else "", split_size=split.value, places=places)
        if self._opts.get("job_name") and self._suffixed:
            state["job_name"] = self._renamed(self._opts["job_name"])
        return state

    def load_state_dict(self, state):
        """Restart the job from state (a state_dict()): the rest of the run, from the next batch."""
        self._check()
        opts = self._resume_opts(state)
        self.close()
        self._pending = self._cur = self._next_epoch = None
        self._done = self._open = False
        self._given = 0
        self._start(opts)

    def _check(self):
        if os.getpid() != self._pid:
            raise _forked(self._pid)
        if self._job is None or self._job.closed:
            raise SpillwayError("spillway: the Loader is closed", _lib.SPW_ECLOSED)

    def __iter__(self):
        """The next epoch's batches: the one after the last iterated (also after a break), or set_epoch's.
        Once the run's last epoch has been iterated, iterating again raises SpillwayError saying so (the
        source's epochs, or max_batches, were all delivered), rather than yielding nothing."""
        self._check()
        want = self._next_epoch
        if want is None and self._open:
            want = self._cur + 1
        if want is not None and want != self._upcoming():
            self._restart_at(want)
        self._next_epoch, self._open = None, False
        if self._done and self._pending is None:
            raise SpillwayError(self._ended_message(), _lib.SPW_ECLOSED)
        return self._epoch()

    def set_epoch(self, epoch):
        """Make the next iteration epoch `epoch` (ahead of or behind the one it would be), as
        DistributedSampler.set_epoch: its order is that epoch's, the same as when reached in turn. Setting the
        epoch the next iteration would start anyway costs nothing; another one restarts the job there."""
        self._check()
        if not isinstance(epoch, int) or isinstance(epoch, bool) or epoch < 0:
            raise ValueError("spillway: set_epoch(%r): an epoch number >= 0" % (epoch,))
        self._next_epoch = epoch

    def _upcoming(self):
        """The epoch the next iteration starts when nothing is skipped."""
        if self._pending is not None:
            return self._pending.epoch
        if self._open:                  # broken off: the job goes on with its rest
            return self._cur
        if self._cur is not None:
            return self._cur + 1
        if self._rest is not None:
            return self._rest["epoch"]
        return self._first // max(1, len(self))

    def _restart_at(self, epoch):
        """Close the job and make it again from epoch's first batch (a resume at that place: through a
        dispatcher the rank rejoins its job); max_batches counts the batches given before too."""
        start = epoch * len(self)
        epochs = json.loads(self.spec).get("source", {}).get("epochs", 1)
        limit = self._opts.get("max_batches")
        if self._pending is not None:
            self._given -= 1            # taken from the job, never given: not one of max_batches
        if (epochs and epoch >= epochs) or (limit is not None and int(limit) <= self._given):
            self._pending, self._done = None, True      # the iteration below says the run is over
            return
        if self._rest is not None:      # leaving the rest of an epoch: the run at the new world size
            self._pending, self._cur = None, None
            self._after_rest(epoch * self._rest["per_epoch"])
            return
        opts = dict(self._opts)     # epoch 0: a new job from the start, as at construction
        if start:
            state = self.state_dict()   # this job, kept for the rank to rejoin through a dispatcher
            state.update(batches=start, places="")
            opts = self._resume_opts(state)
        self._job.close()
        self._pending, self._cur = None, None
        if limit is not None:
            opts["max_batches"] = str(int(limit) - self._given)
        self._done = False
        self._job = _Job(self.spec, opts)

    def _ended_message(self):
        source = json.loads(self.spec).get("source", {})
        epochs = source.get("epochs", 1)
        if self._opts.get("max_batches"):
            return ("spillway: the run is over: its max_batches=%s batches were all delivered; iterate no further, "
                    "or give a larger max_batches" % self._opts["max_batches"])
        return ("spillway: the run is over: all %d epoch%s of the pipeline were delivered (its source has "
                "epochs=%d) and the loader was iterated again. Make the source with epochs=E for E passes "
                "(Pipeline.image_folder(..., epochs=E)), or epochs=None to run as many as the trainer iterates"
                % (epochs, "" if epochs == 1 else "s", epochs))

    def _epoch(self):
        started = False
        b = self._take()
        while b is not None:
            e = b.epoch
            if e is not None and (self._cur is None or e > self._cur):
                if started:             # the next epoch's first batch: it starts the next iteration
                    self._pending, self._open = b, False
                    return
                self._cur = e
            started = self._open = True
            yield b
            b = self._take()
        self._open = False

    def batches(self):
        """Every remaining batch of every epoch, as one stream (Batch.epoch says which)."""
        self._check()
        while True:
            b = self._take()
            if b is None:
                return
            yield b

    def _take(self):
        self._check()
        if self._pending is not None:
            b, self._pending = self._pending, None
            return b
        if self._done:
            return None
        bp = self._job.next()
        while bp is None and self._rest is not None and self._after_rest(self._rest["next"]):
            bp = self._job.next()       # the rest of an epoch ended: the run at the new world size
        if bp is None:
            self._done = True
            return None
        self._given += 1
        return _make_batch(self._job, bp, self._device_batches, self._fields)

    def __len__(self):
        """Batches per epoch (the last one short unless batch.drop_remainder)."""
        self._check()
        return int(_lib.lib().spw_job_batches_per_epoch(self._job.ptr))

    @property
    def classes(self):
        """Class names in label order (image and wav folders; [] for tar shards)."""
        self._check()
        if self._classes is None:
            names = ctypes.POINTER(ctypes.c_char_p)()
            n = _lib.lib().spw_job_classes(self._job.ptr, ctypes.byref(names))
            self._classes = [os.fsdecode(names[i]) for i in range(n)]
        return list(self._classes)

    @property
    def class_to_idx(self):
        return {name: i for i, name in enumerate(self.classes)}

    def stats(self):
        """The job's counters (struct spw_job_stats, client.h) as a dict."""
        self._check()
        buf = ctypes.create_string_buffer(2048)
        n = _lib.lib().spw_job_stats_json(self._job.ptr, buf, len(buf))
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            _lib.lib().spw_job_stats_json(self._job.ptr, buf, len(buf))
        return json.loads(buf.value.decode("utf-8", "replace"))

    def close(self):
        """Stop the job (freed when no batch of it is referenced any more). A no-op in a forked child."""
        if self._job is not None and os.getpid() == self._pid:
            self._pending = None
            self._job.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
