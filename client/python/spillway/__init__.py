# spillway - Python access to Spillway: build a pipeline spec (Pipeline) and iterate its batches as numpy
# arrays that view the C library's memory (Loader); spillway.torch adapts them to PyTorch. Loads
# libspillway.so on first use ($SPILLWAY_LIB or <repo>/build/lib). Thread model: see loader.py.
from .loader import Batch, ForkedError, Key, Loader, SpecError, SpillwayError
from .pipeline import Pipeline

__version__ = "0.1.0"
__all__ = ["Batch", "ForkedError", "Key", "Loader", "Pipeline", "SpecError", "SpillwayError", "__version__"]
