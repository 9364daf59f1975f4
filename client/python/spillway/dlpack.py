# spillway/dlpack.py - DeviceTensor: a batch's data handed over on the GPU (Loader(device_batches=True)),
# given to any DLPack consumer (torch.from_dlpack, cupy.from_dlpack, numpy.from_dlpack for host memory)
# without a copy. Each __dlpack__ makes a DLManagedTensor in C (spw_batch_dlpack) whose deleter, run when
# the consumer's tensor dies, drops the batch's owner; a capsule nobody consumed is deleted with its
# PyCapsule. Thread model: deleters may run on any thread (a ctypes callback takes the GIL).
import ctypes
import itertools
import threading

from . import _lib

_DL_CPU, _DL_CUDA = 1, 2

_keep = {}                      # key -> the batch owner a live DLManagedTensor holds
_keep_lock = threading.Lock()
_keys = itertools.count(1)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _on_free(key):
    with _keep_lock:
        owner = _keep.pop(key, None)
    del owner                   # the owner's __del__ releases the batch when nothing else holds it


class _DLManagedTensorHead(ctypes.Structure):
    # The head of dlpack.h's DLManagedTensor, up to its deleter: DLTensor (data, device, ndim, dtype,
    # shape, strides, byte_offset), manager_ctx, deleter.
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int), ("device_id", ctypes.c_int),
                ("ndim", ctypes.c_int), ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.CFUNCTYPE(None, ctypes.c_void_p))]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_valid.restype = ctypes.c_int
_capsule_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # A consumer renames the capsule "used_dltensor" and owns the tensor; one still named "dltensor" was
    # never consumed: delete the tensor here.
    if _capsule_valid(capsule, b"dltensor"):
        head = _DLManagedTensorHead.from_address(_capsule_pointer(capsule, b"dltensor"))
        head.deleter(ctypes.addressof(head))


class DeviceTensor:
    """A batch's data in device memory (or host memory: a batch that found no room on the device), shared
    with the library: torch.from_dlpack(t) (or cupy's, numpy's for host memory) views it without a copy and
    keeps the batch alive until that view dies. .shape, .dtype (numpy's name), .device ((DLPack device type,
    id): (2, N) for CUDA device N, (1, 0) for host memory), .is_cuda."""
    __slots__ = ("_owner", "_index", "shape", "dtype", "device")

    def __init__(self, owner, index, shape, dtype, device):
        self._owner, self._index, self.shape, self.dtype, self.device = owner, index, shape, dtype, device

    @property
    def is_cuda(self):
        return self.device[0] == _DL_CUDA

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None):
        # The data is complete when the batch is handed over (the library waited for its stream), so any
        # consumer stream may read it at once: `stream` needs no event.
        key = next(_keys)
        with _keep_lock:
            _keep[key] = self._owner
        ptr = _lib.lib().spw_batch_dlpack(self._owner.ptr, self._index, ctypes.cast(_on_free, ctypes.c_void_p),
                                          ctypes.c_void_p(key))
        if not ptr:
            with _keep_lock:
                _keep.pop(key, None)
            raise MemoryError("spw_batch_dlpack")
        return _capsule_new(ptr, b"dltensor", ctypes.cast(_capsule_destructor, ctypes.c_void_p))

    def __repr__(self):
        return "DeviceTensor(shape=%s, dtype=%s, device=%s)" % (self.shape, self.dtype, self.device)
