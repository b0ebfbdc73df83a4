"""gpurt for Python: PyTorch CUDA memory snapshots examined by gpurt's C library.

    import gpurt
    t = gpurt.load("snapshot.pickle")          # or the dict torch.cuda.memory._snapshot() returns
    gpurt.doctor(t)                              # why it OOMed, which code held the memory, the fix
    gpurt.whatif(t, capacity="24GiB")            # every PYTORCH_CUDA_ALLOC_CONF worth trying
    r = gpurt.replay(t, conf="expandable_segments:True")
    r.peak_reserved, r.series()                  # summary figures, per-event figures
    gpurt.report(t, "report.html")               # one page to look at

Every figure comes from the C library (the same code as the ``gpurt`` command;
the faithful model of PyTorch's CUDACachingAllocator); long calls release the
GIL, so a thread pool maps snapshots in parallel. Failures raise subclasses of
:class:`gpurt.Error` carrying the library's status name and message.
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Iterator, Mapping, Sequence, Union

from . import _native
from ._errors import *  # noqa: F401,F403 - the exception classes are the package's
from ._errors import BY_STATUS, Error, InvalidArgError, ParseError, UnsupportedError
from ._snapshot import snapshot_bytes

__version__ = "0.1.0"

_native._register_errors(Error, dict(BY_STATUS))

Size = Union[int, str]
PathLike = Union[str, "os.PathLike[str]"]

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?)\s*([kmgtKMGT]?)(?:i?[bB])?\s*$")
_UNIT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(size: Size | None) -> int:
    """Bytes from an int or a string such as ``"24GiB"``, ``"512M"``, ``"1048576"``
    (K, M, G, T are powers of 1024, as in the ``gpurt`` command). None is 0."""
    if size is None:
        return 0
    if isinstance(size, bool) or not isinstance(size, (int, str)):
        raise InvalidArgError(f"a size is an int or a string such as '24GiB', not {size!r}",
                              "GRT_ERR_INVALID_ARG", 1)
    if isinstance(size, int):
        value = size
    else:
        m = _SIZE.match(size)
        if not m:
            raise InvalidArgError(f"size {size!r}: want a number with K, M, G or T (e.g. '24GiB')",
                                  "GRT_ERR_INVALID_ARG", 1)
        value = int(float(m.group(1)) * _UNIT[m.group(2).lower()])
    if not 0 <= value < 1 << 64:
        raise InvalidArgError(f"size {size!r} is out of range (0 to 2^64 - 1 bytes)", "GRT_ERR_INVALID_ARG", 1)
    return value


class Trace:
    """A loaded trace: a PyTorch snapshot (file or dict), a native trace, an RMM or minimalloc CSV.
    Immutable; any number of threads may replay it at once."""

    def __init__(self, native: Any):
        self._t = native

    @property
    def name(self) -> str:
        """The file it was read from, or ``<dict>``."""
        return self._t.name

    @property
    def device(self) -> int:
        """The device (``device_traces`` entry) loaded."""
        return self._t.device

    @property
    def info(self) -> dict[str, Any]:
        """Format, events, streams, segments, stacks, events per kind."""
        return self._t.info()

    def recorded(self) -> dict[str, Any]:
        """The recorded run's own figures (reserved and requested at start, peak and end; device calls; OOMs)."""
        return self._t.recorded()

    def segments(self) -> list[dict[str, Any]]:
        """The snapshot's final segments."""
        keys = ("address", "size", "stream", "large", "blocks")
        return [dict(zip(keys, s)) for s in self._t.segments()]

    def __len__(self) -> int:
        return self.info["events"]

    def __repr__(self) -> str:
        i = self.info
        return f"<gpurt.Trace {os.path.basename(self.name)!r}: {i['format']}, {i['events']} events, device {self.device}>"


TraceLike = Union[Trace, PathLike, Mapping[str, Any], bytes]


def load(source: TraceLike, device: int = 0) -> Trace:
    """A trace from a file (any format the ``gpurt`` command reads), from a snapshot
    dict (``torch.cuda.memory._snapshot()``: plain dicts and lists) or from the bytes
    of a snapshot file. ``device`` picks the ``device_traces`` entry."""
    if isinstance(source, Trace):
        return source
    if isinstance(device, bool) or not isinstance(device, int) or device < 0:
        raise InvalidArgError(f"device must be a non-negative int, not {device!r}", "GRT_ERR_INVALID_ARG", 1)
    if isinstance(source, Mapping):
        return Trace(_native.load_bytes(snapshot_bytes(dict(source)), "<dict>", device))
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Trace(_native.load_bytes(bytes(source), "<bytes>", device))
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        data = _decompressed(path)
        if data is not None:
            return Trace(_native.load_bytes(data, path, device))
        return Trace(_native.load_path(path, device))
    raise InvalidArgError(f"cannot load a {type(source).__name__}: give a path, a snapshot dict or bytes",
                          "GRT_ERR_INVALID_ARG", 1)


def _decompressed(path: str) -> bytes | None:
    """A gzip or zstd file's bytes (told by the magic, as the CLI tells them); None for any other file."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError:
        return None  # the C loader says why it cannot open it
    if magic[:2] == b"\x1f\x8b":
        import gzip  # noqa: PLC0415

        with gzip.open(path, "rb") as f:
            return f.read()
    if magic == b"\x28\xb5\x2f\xfd":
        try:
            from compression import zstd  # noqa: PLC0415  (Python 3.14)
        except ImportError:
            try:
                import zstandard as zstd  # noqa: PLC0415
            except ImportError:
                raise UnsupportedError(f"{path}: a zstd file needs Python 3.14's compression.zstd or the zstandard "
                                       "package; or decompress it first (zstd -d)", "GRT_ERR_UNSUPPORTED", 15) from None
        with open(path, "rb") as f:
            return zstd.decompress(f.read())
    return None


def _trace(t: TraceLike) -> Trace:
    return t if isinstance(t, Trace) else load(t)


class ReplayResult:
    """One replay's figures: every summary figure is an attribute (``peak_reserved``,
    ``ooms``, ``first_oom``, ``min_capacity``, ...); :meth:`series` gives the per-event figures."""

    def __init__(self, figures: dict[str, Any], trace: Trace, policy: str, conf: str | None):
        self._series = figures.pop("series")
        self._figures = figures
        self.trace, self.policy, self.conf = trace, policy, conf

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["_figures"][name]
        except KeyError:
            raise AttributeError(name) from None

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._figures))

    def as_dict(self) -> dict[str, Any]:
        """The summary figures (the keys of ``gpurt replay --json``, and a few more)."""
        return dict(self._figures)

    def series(self, pandas: bool | None = None) -> Any:
        """Per-event figures after each event: reserved, allocated, requested, active,
        cached, largest_free, live, device_mallocs, device_frees (bytes or counts) and
        fragmentation. A pandas DataFrame when pandas is importable (or ``pandas=True``),
        else a dict of lists. Empty when the replay kept no series."""
        data = self._series or {}
        if pandas is False:
            return dict(data)
        try:
            import pandas as pd  # noqa: PLC0415 - optional
        except ImportError:
            if pandas:
                raise
            return dict(data)
        return pd.DataFrame(data)

    def __repr__(self) -> str:
        f = self._figures
        return (f"<gpurt.ReplayResult {self.policy} {self.conf or ''}: peak reserved {f['peak_reserved']}, "
                f"ooms {f['ooms']}>")


def replay(trace: TraceLike, conf: str | None = None, capacity: Size | None = None, policy: str = "caching",
           device: int | None = None, *, device_model: str = "paged", placement: str = "auto",
           honor_releases: bool = True, series: bool = True, search: bool | None = None,
           from_empty: bool = False) -> ReplayResult:
    """Replays a trace through an allocator policy, as ``gpurt replay --json`` does.

    ``conf`` is a ``PYTORCH_CUDA_ALLOC_CONF`` string applied over the snapshot's own
    settings; ``capacity`` the device's bytes (default: the recorded addresses' span, or
    1 TiB; a capacity turns recorded placement into first fit); ``device`` loads that
    device of a snapshot file; ``search`` also finds the smallest zero-OOM capacity
    (default: for traces under 2M events); ``series`` keeps per-event figures."""
    if isinstance(trace, Trace) and device is not None and device != trace.device:
        raise InvalidArgError(f"device={device}, but the trace was loaded for device {trace.device}: "
                              f"load it again with gpurt.load(path, device={device})", "GRT_ERR_INVALID_ARG", 1)
    t = load(trace, device) if device is not None and not isinstance(trace, Trace) else _trace(trace)
    figures = _native.replay(t._t, policy=policy, conf=conf, capacity=parse_size(capacity), placement=placement,
                             device_model=device_model, honor_releases=honor_releases, series=series,
                             search=-1 if search is None else int(bool(search)), from_empty=from_empty)
    figures["trace"] = os.path.basename(t.name)
    figures["policy"] = policy
    return ReplayResult(figures, t, policy, conf)


def fidelity(trace: TraceLike) -> dict[str, Any]:
    """The faithful model against a PyTorch snapshot: how many allocations land at the
    recorded address (``exact`` of ``allocs``), segment decisions, releases, OOMs and the
    final layout, as ``gpurt replay --fidelity --json``."""
    return _native.fidelity(_trace(trace)._t)


def _advice_args(capacity: Size | None, device_model: str, goal: str, threads: int | None,
                 search: bool) -> dict[str, Any]:
    return {"capacity": parse_size(capacity), "device_model": device_model, "goal": goal,
            "threads": threads or 0, "search": bool(search)}


def whatif(trace: TraceLike, capacity: Size | None = None, *, goal: str = "no-oom", device_model: str = "paged",
           threads: int | None = None, search: bool = False) -> dict[str, Any]:
    """Every ``PYTORCH_CUDA_ALLOC_CONF`` worth trying on this snapshot, replayed at
    ``capacity`` (default: what the snapshot shows the process had), sorted by ``goal``
    (``no-oom``, ``min-reserved``, ``min-syncs``): ``rows``, ``best``, ``recorded``, as
    ``gpurt whatif --json``."""
    t = _trace(trace)
    return json.loads(_native.whatif_json(t._t, **_advice_args(capacity, device_model, goal, threads, search)))


def doctor(trace: TraceLike, capacity: Size | None = None, *, goal: str = "no-oom", device_model: str = "paged",
           threads: int | None = None) -> dict[str, Any]:
    """The memory doctor: the verdict (healthy, demand-bound or fragmentation-bound) and
    why, the state at the peak and the first OOM, the allocation sites holding the memory
    (folded stack frames), the segments live blocks pin, the runtime contract, and the
    recommended ``PYTORCH_CUDA_ALLOC_CONF``, as ``gpurt doctor --json``."""
    t = _trace(trace)
    return json.loads(_native.doctor_json(t._t, **_advice_args(capacity, device_model, goal, threads, False)))


def report(trace: TraceLike, path: PathLike) -> str:
    """Writes the snapshot's self-contained HTML page (the doctor's verdict and sites,
    live memory over time, the allocator's state at any event) and returns its path."""
    t = _trace(trace)
    _native.page_save(t._t, os.fspath(path), os.path.basename(t.name))
    return os.fspath(path)


def _site_key(frames: Sequence[Mapping[str, Any]]) -> str:
    if not frames:
        return "(no frames recorded)"
    return " < ".join(f"{f['name']} ({f['filename']}:{f['line']})" for f in frames[:4])


def diff(a: TraceLike, b: TraceLike) -> dict[str, Any]:
    """Two snapshots of one program, before and after a change: the recorded figures
    side by side (``figures``: name -> (a, b)), the allocation sites whose bytes live at
    the peak changed most (matched by their folded frames), and the final segments only
    one of them holds, as ``gpurt diff`` prints them."""
    ta, tb = _trace(a), _trace(b)
    ra, rb = ta.recorded(), tb.recorded()
    names = ("reserved_start", "reserved_peak", "reserved_end", "requested_start", "requested_peak",
             "requested_end", "device_mallocs", "device_frees", "ooms")
    figures = {k: (ra[k], rb[k]) for k in names}
    sites: dict[str, list[int]] = {}
    for i, d in enumerate((doctor(ta), doctor(tb))):
        for s in d["peak_sites"]:
            sites.setdefault(_site_key(s["frames"]), [0, 0])[i] += s["bytes"]
    grown = sorted(({"site": k, "a": v[0], "b": v[1], "change": v[1] - v[0]} for k, v in sites.items()),
                   key=lambda s: (-abs(s["change"]), s["site"]))
    seg_a = {(s["address"], s["size"]) for s in ta.segments()}
    seg_b = {(s["address"], s["size"]) for s in tb.segments()}
    return {"a": os.path.basename(ta.name), "b": os.path.basename(tb.name), "figures": figures, "sites": grown,
            "segments_only_a": sorted(seg_a - seg_b), "segments_only_b": sorted(seg_b - seg_a)}


def statuses() -> list[tuple[int, str, str]]:
    """Every status the library defines: (code, name, text)."""
    return _native.statuses()


def policies() -> list[str]:
    """The allocator policies' names (``caching`` is PyTorch's)."""
    return _native.policies()


class Device(_native.Device):
    """The simulated first-fit device: ``Device(capacity="16GiB", model="contiguous")``."""

    def __init__(self, capacity: Size, model: str = "contiguous", host_backing: bool = False):
        super().__init__(parse_size(capacity), model, host_backing)


class Allocator(_native.Allocator):
    """An allocator policy over a device, ``caching`` (PyTorch's) by default, with
    ``conf`` a ``PYTORCH_CUDA_ALLOC_CONF`` string. ``malloc`` returns a device address;
    a double free, a foreign pointer or a device OOM raise the matching :class:`Error`
    and change nothing."""

    def __init__(self, device: Device, policy: str = "caching", conf: str | None = None):
        super().__init__(device, policy, conf)

    def malloc(self, size: Size, stream: int = 0) -> int:  # type: ignore[override]
        return super().malloc(parse_size(size), stream)

    def stats(self) -> dict[str, Any]:
        """``torch.cuda.memory_stats()``'s flat keys, plus ``largest_free_block`` and gpurt's extras."""
        return json.loads(self.stats_json())

    def snapshot(self) -> dict[str, Any]:
        """``torch.cuda.memory_snapshot()``'s segments and blocks."""
        return json.loads(self.snapshot_json())

    def __enter__(self) -> "Allocator":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def map_snapshots(fn: Any, sources: Sequence[TraceLike], threads: int | None = None) -> Iterator[Any]:
    """``fn(load(s))`` for each source on a thread pool (the C calls release the GIL)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(max_workers=threads or os.cpu_count() or 1) as pool:
        yield from pool.map(lambda s: fn(load(s)), sources)


__all__ = ["Allocator", "Device", "Error", "ReplayResult", "Trace", "diff", "doctor", "fidelity", "load",
           "map_snapshots", "parse_size", "policies", "replay", "report", "statuses", "whatif"] + \
          [c.__name__ for c in BY_STATUS.values()]
