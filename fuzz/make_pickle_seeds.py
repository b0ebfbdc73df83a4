#!/usr/bin/env python3
"""Writes small hand-made PyTorch-snapshot-shaped pickles (plain dicts only) to fuzz/corpus/pytorch/.

Seeds for fuzz_pytorch: every protocol from 2 to 5, with and without optional keys, block
addresses present and absent, settings as a dict and as an int, several devices, stacks
shaped like real ones (shared frame dicts the pickler memoizes, frames on blocks and segments,
malformed entries the reader drops), and the extreme values: streams 2^64-1 and 2^63, segments
just below 2^64, a request of 2^63 bytes.
Run from the repository root: python3 fuzz/make_pickle_seeds.py
"""
import os
import pickle
import pickletools

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "pytorch")


def ev(action, addr, size, t, stream=0, frames=True):
    e = {"action": action, "addr": addr, "size": size, "stream": stream, "time_us": t}
    if frames:
        e["frames"] = [{"filename": "train.py", "line": 10 + t % 7, "name": "step"}]
    return e


def snapshot(n_dev=1, with_addr=True, rp2_int=False, expandable=False):
    base = 0x7F0000000000
    blocks = [
        {"size": 512, "requested_size": 100, "state": "active_allocated", "frames": []},
        {"size": 2 * 1024 * 1024 - 512, "requested_size": 0, "state": "inactive", "frames": []},
    ]
    if with_addr:
        blocks[0]["address"] = base
        blocks[1]["address"] = base + 512
    seg = {"device": 0, "address": base, "total_size": 2 * 1024 * 1024, "allocated_size": 512,
           "active_size": 512, "requested_size": 100, "stream": 0, "segment_type": "small",
           "segment_pool_id": (0, 0), "is_expandable": expandable, "frames": [], "blocks": blocks}
    trace = [
        ev("segment_alloc", base, 2 * 1024 * 1024, 1),
        ev("alloc", base, 100, 2),
        ev("alloc", base + 512, 700, 3, stream=7),
        ev("free_requested", base + 512, 700, 4, stream=7),
        ev("free_completed", base + 512, 700, 5, stream=7),
        ev("free_requested", base + 4096, 64, 6, frames=False),
        ev("free_completed", base + 4096, 64, 7, frames=False),
        {"action": "oom", "addr": 1 << 20, "size": 1 << 33, "stream": 0, "time_us": 8},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 9},
    ]
    settings = {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
                "expandable_segments": expandable,
                "roundup_power2_divisions": 4 if rp2_int else {str(1 << i): i % 3 for i in range(16)}}
    return {"segments": [seg], "device_traces": [trace] + [[] for _ in range(n_dev - 1)],
            "allocator_settings": settings, "external_annotations": []}


def with_stacks():
    """Frames as PyTorch records them (innermost first), the same dict objects shared by events."""
    s = snapshot()
    rec = {"name": "torch::unwind::unwind()", "filename": "??", "line": 0}
    alloc = {"name": "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)",
             "filename": "", "line": 0}
    user = {"name": "forward", "filename": "/home/u/model.py", "line": 54}
    top = {"name": "<module>", "filename": "/home/u/train.py", "line": -1}
    stack = [rec, alloc, user, top]
    for i, e in enumerate(s["device_traces"][0]):
        e["frames"] = stack if i % 2 else list(stack[:2 + i % 3])
    s["device_traces"][0][2]["frames"] = [rec, 7, {"name": "f"}, {"name": 1, "filename": "a.py", "line": 2}, user]
    s["segments"][0]["frames"] = [top]
    s["segments"][0]["blocks"][0]["frames"] = stack
    s["segments"][0]["blocks"][1]["frames"] = "not a list"
    return s


def sentinel(top_gap=8 << 20):
    """Every value a container could take for "empty" or "none": segments just below 2^64 (ending
    top_gap bytes below it; 0: at it), streams 2^64-1, 2^64-2 and 2^63, a request of 2^63 bytes."""
    mib = 1 << 20
    s = snapshot()
    top = (1 << 64) - top_gap - 4 * mib
    smax, snext, shalf = (1 << 64) - 1, (1 << 64) - 2, 1 << 63
    seg = s["segments"][0]
    seg.update(address=top, stream=smax)
    seg["blocks"][0]["address"], seg["blocks"][1]["address"] = top, top + 512
    s["device_traces"][0] = [
        ev("segment_alloc", top + 2 * mib, 2 * mib, 1, stream=snext),
        ev("alloc", top + 2 * mib, 100, 2, stream=snext),
        ev("alloc", top + 1024, 700, 3, stream=smax),
        ev("free_requested", top + 1024, 700, 4, stream=smax),
        ev("free_completed", top + 1024, 700, 5, stream=smax),
        ev("alloc", top + 4096, 512, 6, stream=shalf),
        ev("free_completed", top + 4096, 512, 7, stream=shalf),
        ev("free_completed", top, 100, 8, stream=smax),
        {"action": "oom", "addr": smax, "size": 1 << 63, "stream": smax, "time_us": 9},
        ev("free_requested", top + 2 * mib, 100, 10, stream=snext),
        ev("free_completed", top + 2 * mib, 100, 11, stream=snext),
        ev("segment_free", top + 2 * mib, 2 * mib, 12, stream=snext),
    ]
    return s


def main():
    os.makedirs(OUT, exist_ok=True)
    variants = {
        "basic": snapshot(),
        "noaddr": snapshot(with_addr=False),
        "rp2int": snapshot(rp2_int=True),
        "twodev": snapshot(n_dev=2),
        "expandable": snapshot(expandable=True),
        "segments_only": [snapshot()["segments"][0]],
        "stacks": with_stacks(),
        "sentinel": sentinel(),
        "sentinel_top": sentinel(0),
    }
    for name, obj in variants.items():
        for proto in (2, 3, 4, 5):
            data = pickle.dumps(obj, protocol=proto)
            with open(os.path.join(OUT, f"{name}_p{proto}.pickle"), "wb") as f:
                f.write(data)
        with open(os.path.join(OUT, f"{name}_opt.pickle"), "wb") as f:
            f.write(pickletools.optimize(pickle.dumps(obj, protocol=4)))


if __name__ == "__main__":
    main()
