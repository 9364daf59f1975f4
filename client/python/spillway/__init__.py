# spillway - Python access to Spillway: build a pipeline spec (Pipeline) and iterate its batches as numpy
# arrays that view the C library's memory (Loader); spillway.torch adapts them to PyTorch. Loads
# libspillway.so on first use (_lib.py says from where). Thread model: see loader.py.
from .loader import Batch, ForkedError, Key, Loader, SpecError, SpillwayError
from .pipeline import Pipeline, ops, view
from ._version import __version__
__all__ = ["Batch", "ForkedError", "Key", "Loader", "Pipeline", "SpecError", "SpillwayError", "__version__", "ops", "view"]
