"""An in-memory snapshot (the dict ``torch.cuda.memory._snapshot()`` returns)
handed to the C reader.

The dict is serialized with Python's own pickler, restricted to plain values
(dicts, lists, tuples, strings, bytes, numbers, booleans, None): anything else
is refused here, naming where it sits, before a byte is written. The C
library's pickle reader then reads it exactly as it reads a
``_dump_snapshot`` file, so a dict and the file it would have been dumped to
give the same trace, and every malformed value gets the reader's precise
error (``device_traces[0][4]: 'size' is not a non-negative integer``).
Nothing is ever unpickled in Python.
"""
from __future__ import annotations

import io
import pickle
from typing import Any

from ._errors import ParseError

_PLAIN = (dict, list, tuple, str, bytes, int, float, bool, type(None))


class _NotPlain(Exception):
    pass


class _PlainPickler(pickle.Pickler):
    # Called for every object but None, booleans and exact ints, floats,
    # bytes, strings, dicts, sets, lists and tuples.
    def reducer_override(self, obj: Any) -> Any:
        raise _NotPlain(obj)


def _where(value: Any, path: str = "snapshot", depth: int = 0) -> str | None:
    """The path of the first value that is not plain (the slow path, on error only)."""
    if type(value) not in _PLAIN:
        return f"{path}: a {type(value).__name__} is not a snapshot value (plain dicts, lists, str, int, float)"
    if depth > 64:
        return f"{path}: nested more than 64 levels"
    if isinstance(value, dict):
        for k, v in value.items():
            if type(k) not in (str, int):
                return f"{path}: the key {k!r} is a {type(k).__name__}, not a string"
            found = _where(v, f"{path}[{k!r}]", depth + 1)
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _where(v, f"{path}[{i}]", depth + 1)
            if found:
                return found
    return None


def snapshot_bytes(snapshot: dict) -> bytes:
    """The pickle of a snapshot dict, as ``torch.cuda.memory._dump_snapshot`` writes it."""
    if not isinstance(snapshot, dict):
        raise ParseError(f"a snapshot is a dict, not a {type(snapshot).__name__}", "GRT_ERR_PARSE", 16)
    buf = io.BytesIO()
    try:
        _PlainPickler(buf, protocol=4).dump(snapshot)
    except (_NotPlain, RecursionError):
        where = _where(snapshot) or "snapshot: a value that cannot be pickled"
        raise ParseError(where, "GRT_ERR_PARSE", 16) from None
    return buf.getvalue()
