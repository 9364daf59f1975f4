# spillway/torch.py - PyTorch adapter: SpillwayDataset, an IterableDataset of whole batches whose tensors
# share the C batch's memory (torch.from_numpy over the Loader's views, torch.from_dlpack over its device
# batches: no copy), and loader(), the same
# wrapped in a DataLoader with num_workers=0. Spillway parallelises by itself: in a DataLoader worker
# process (num_workers > 0) the dataset raises at once. Thread model: as spillway.Loader (one iterating
# thread; tensors may die anywhere).
import os
import warnings

import torch
import torch.utils.data

from .dlpack import DeviceTensor
from .loader import FORK_MESSAGE, ForkedError, Loader, _forked

__all__ = ["SpillwayDataset", "loader", "FORK_MESSAGE"]


def _dtype(d):
    if d is None or isinstance(d, torch.dtype):
        return d
    t = getattr(torch, str(d), None)
    if not isinstance(t, torch.dtype):
        raise ValueError("dtype: %r is not a torch dtype" % (d,))
    return t


class SpillwayDataset(torch.utils.data.IterableDataset):
    """Batches of a Spillway pipeline as torch tensors: each item is a spillway.Batch (a tuple) of
    (data, labels) or (data, labels, lengths), with .keys. The tensors share the library's memory (no copy)
    and keep their batch alive; the batch goes back to the library when the last of them is gone.
    Each iteration is one epoch of the spec's (as spillway.Loader); len() is batches per epoch. With views,
    the tuple is (view_0, ..., view_k-1, labels), and .views / .data list the views.

    pipeline and **loader_options: as spillway.Loader (the job is created here, eagerly).
    dtype: None keeps the pipeline's dtype (uint8 images, or float32/float16 after normalize / to_tensor).
      Another dtype converts the data tensor (every view's) with .to(dtype) - a copy, without scaling: put normalize or
      to_tensor in the pipeline for scaled floats (in C, and without the copy).
    pin_memory: copy each tensor into page-locked memory (tensor.pin_memory()) when CUDA is available, for
      non_blocking transfers; without CUDA a no-op (with a warning once, at construction).
    gpu=N, device_batches=True (FusionFlow's hand-over): the data tensor is the library's device memory on
      cuda:N (torch.from_dlpack, no copy), the labels are moved there too; a batch the library could only
      hand over in host memory is copied there. Without CUDA in torch, tensors stay where the library put
      them.
    Use it directly or in DataLoader(ds, batch_size=None, num_workers=0): Spillway runs the pipeline on its
    own threads and workers. In a DataLoader worker process it raises RuntimeError(FORK_MESSAGE).
    """

    def __init__(self, pipeline, dtype=None, pin_memory=False, **loader_options):
        super().__init__()
        self.dtype = _dtype(dtype)
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        if pin_memory and not self.pin_memory:
            warnings.warn("spillway: pin_memory=True without CUDA: batches are left in pageable memory",
                          stacklevel=2)
        self.epoch = 0
        self._loader = Loader(pipeline, **loader_options)
        gpu = loader_options.get("gpu")
        self.device = (torch.device("cuda", int(gpu)) if loader_options.get("device_batches") and
                       torch.cuda.is_available() else None)

    def _check_process(self):
        if torch.utils.data.get_worker_info() is not None or os.getpid() != self._loader._pid:
            raise _forked(self._loader._pid)

    def __iter__(self):
        self._check_process()           # here, not at the first next(): iter() in a worker raises at once
        return (self._tensors(batch) for batch in self._loader)

    def _tensors(self, batch):
        # Both share memory; the array, or the tensor's DLPack deleter, keeps the C batch alive.
        ts = [torch.from_dlpack(a) if isinstance(a, DeviceTensor) else torch.from_numpy(a) for a in batch]
        if self.device is not None:
            ts = [t.to(self.device) for t in ts]        # no-op for the data already there
        for i in range(batch._n_views or 1):             # the data, or every view's
            if self.dtype is not None and ts[i].dtype != self.dtype:
                ts[i] = ts[i].to(self.dtype)
        if self.pin_memory and self.device is None:
            ts = [t.pin_memory() for t in ts]
        return batch.with_tensors(ts)

    def __getstate__(self):
        # DataLoader pickles the dataset into worker processes (spawn / forkserver): refuse right here.
        raise ForkedError("spillway: a SpillwayDataset cannot be pickled into another process (such as a "
                          "torch DataLoader worker with num_workers > 0, started by spawn or forkserver). "
                          + FORK_MESSAGE)

    def __len__(self):
        """Batches per epoch, as len(DataLoader)."""
        self._check_process()
        return len(self._loader)

    def set_epoch(self, epoch):
        """As DistributedSampler.set_epoch: the next iteration is epoch `epoch` (spillway.Loader.set_epoch),
        shuffled as that epoch always is (source.seed); without it each iteration is the next epoch."""
        self._loader.set_epoch(int(epoch))
        self.epoch = int(epoch)

    @property
    def classes(self):
        return self._loader.classes

    @property
    def class_to_idx(self):
        return self._loader.class_to_idx

    def stats(self):
        return self._loader.stats()

    def state_dict(self):
        """What was delivered so far (spillway.Loader.state_dict): save it with the model's."""
        return self._loader.state_dict()

    def load_state_dict(self, state):
        """Go on from a state_dict(): exactly the batches not yet delivered, then the rest of the run."""
        self._loader.load_state_dict(state)

    def close(self):
        self._loader.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _as_is(batch):
    return batch


def loader(pipeline, dtype=None, pin_memory=False, **loader_options):
    """A torch DataLoader over SpillwayDataset(pipeline, ...): batch_size=None (Spillway batches),
    num_workers=0 (Spillway parallelises), items passed through as spillway.Batch of tensors.
    len() is batches per epoch; .dataset is the SpillwayDataset (classes, stats, close)."""
    ds = SpillwayDataset(pipeline, dtype=dtype, pin_memory=pin_memory, **loader_options)
    return torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0, collate_fn=_as_is)

