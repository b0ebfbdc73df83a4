"""Shared fixtures: the gpurt CLI the figures are checked against ($GPURT_CLI),
the shared snapshots (../shared, skipped with a message when absent) and a
snapshot dict built here, in the shape torch.cuda.memory._snapshot() returns."""
from __future__ import annotations

import copy
import json
import os
import pathlib
import pickle
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("GRT_SHARED_DIR", ROOT.parent / "shared"))
SNAPSHOTS = SHARED / "traces" / "pytorch"
MiB = 1 << 20
BASE = 0x7F0000000000


def frames(line: int) -> list[dict]:
    return [{"name": "forward", "filename": "/work/model.py", "line": line},
            {"name": "<module>", "filename": "/work/train.py", "line": 7}]


def built_snapshot() -> dict:
    """A 20 MiB segment holding a 3 MiB block (freed) and a 5 MiB block (live), as PyTorch records it."""
    ev = [
        {"action": "segment_alloc", "addr": BASE, "size": 20 * MiB, "stream": 0, "time_us": 1, "frames": frames(10)},
        {"action": "alloc", "addr": BASE, "size": 3 * MiB, "stream": 0, "time_us": 2, "frames": frames(10)},
        {"action": "alloc", "addr": BASE + 3 * MiB, "size": 5 * MiB, "stream": 0, "time_us": 3, "frames": frames(11)},
        {"action": "free_requested", "addr": BASE, "size": 3 * MiB, "stream": 0, "time_us": 4, "frames": frames(12)},
        {"action": "free_completed", "addr": BASE, "size": 3 * MiB, "stream": 0, "time_us": 5, "frames": frames(12)},
    ]
    blocks = [
        {"address": BASE, "size": 3 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
        {"address": BASE + 3 * MiB, "size": 5 * MiB, "requested_size": 5 * MiB, "state": "active_allocated",
         "frames": frames(11)},
        {"address": BASE + 8 * MiB, "size": 12 * MiB, "requested_size": 0, "state": "inactive", "frames": []},
    ]
    seg = {"device": 0, "address": BASE, "total_size": 20 * MiB, "allocated_size": 5 * MiB, "active_size": 5 * MiB,
           "requested_size": 5 * MiB, "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
           "is_expandable": False, "frames": frames(10), "blocks": blocks}
    return {"segments": [seg], "device_traces": [ev],
            "allocator_settings": {"expandable_segments": False, "max_split_size": -1}}


@pytest.fixture
def snapshot() -> dict:
    return copy.deepcopy(built_snapshot())


def shared_snapshot(name: str) -> pathlib.Path:
    path = SNAPSHOTS / name
    if not path.exists():
        pytest.skip(f"{path} not found: the shared snapshots are absent (../shared, or set GRT_SHARED_DIR)")
    return path


def trusted_dict(path: pathlib.Path) -> dict:
    """A shared snapshot as the dict torch would hand over (the test's own trusted data)."""
    with open(path, "rb") as f:
        return pickle.load(f)


def cli_json(*args: str) -> dict:
    cli = os.environ.get("GPURT_CLI")
    if not cli:
        pytest.skip("GPURT_CLI is not set: the gpurt command to compare with (tests/test_python.sh sets it)")
    out = subprocess.run([cli, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)
