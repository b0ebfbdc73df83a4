"""gpurt's caching allocator as PyTorch's CUDA allocator.

    import gpurt.torch
    gpurt.torch.use_allocator(conf="expandable_segments:True")   # before the first CUDA allocation

installs ``libgpurt_torch_alloc.so`` (built where the CUDA backend is, and
installed beside libgpurt) through ``torch.cuda.memory.CUDAPluggableAllocator``.
The allocator reads its settings from ``GRT_ALLOC_CONF`` at its first
allocation, so ``conf`` is set there. Needs PyTorch with CUDA; raises
:class:`gpurt.UnsupportedError` elsewhere.
"""
from __future__ import annotations

import ctypes
import os

from . import _native
from ._errors import UnsupportedError

LIBRARY = "libgpurt_torch_alloc.so"


def library_path() -> str:
    """Where the shim is: ``$GPURT_TORCH_ALLOC``, else the library folder gpurt was built against."""
    return os.environ.get("GPURT_TORCH_ALLOC") or os.path.join(_native.libdir, LIBRARY)


def available() -> bool:
    """True when PyTorch with CUDA and the shim are both here."""
    try:
        import torch  # noqa: PLC0415 - optional
    except ImportError:
        return False
    return bool(torch.cuda.is_available()) and os.path.exists(library_path())


def use_allocator(conf: str | None = None) -> object:
    """Makes gpurt's caching allocator PyTorch's CUDA allocator; returns the allocator object."""
    try:
        import torch  # noqa: PLC0415 - optional
    except ImportError:
        raise UnsupportedError("gpurt.torch needs PyTorch (import torch failed)", "GRT_ERR_UNSUPPORTED", 15) from None
    if not torch.cuda.is_available():
        raise UnsupportedError("gpurt.torch needs a CUDA device (torch.cuda.is_available() is False)",
                               "GRT_ERR_UNSUPPORTED", 15)
    path = library_path()
    if not os.path.exists(path):
        raise UnsupportedError(f"{path} not found: gpurt was built without the CUDA backend (no cuda.h)",
                               "GRT_ERR_UNSUPPORTED", 15)
    if conf is not None:
        os.environ["GRT_ALLOC_CONF"] = conf
    allocator = torch.cuda.memory.CUDAPluggableAllocator(path, "gpurt_alloc", "gpurt_free")
    torch.cuda.memory.change_current_allocator(allocator)
    return allocator


def stats(device: int = 0) -> dict:
    """The installed allocator's counters (its gpurt_stats_json)."""
    import json  # noqa: PLC0415

    lib = ctypes.CDLL(library_path())
    buf = ctypes.create_string_buffer(1 << 16)
    n = lib.gpurt_stats_json(device, buf, len(buf))
    if n < 0:
        return {}
    return json.loads(buf.value.decode())
