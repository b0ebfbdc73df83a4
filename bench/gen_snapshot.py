#!/usr/bin/env python3
"""gen_snapshot.py — a large PyTorch-shaped memory snapshot for benchmarks.

Writes what torch.cuda.memory._dump_snapshot writes (a pickled dict with
segments, device_traces and allocator_settings), without PyTorch:
a training-shaped loop of alloc / free_requested / free_completed events
with sizes drawn log-uniform between 512 B and 64 MiB, a working set of up
to 2000 live tensors, and every event carrying one of 40 recorded Python
stacks of 6 frames (a fresh list of fresh dicts per event, as PyTorch
builds them). Deterministic: random.Random(seed).

    python3 bench/gen_snapshot.py OUT.pickle [--events N] [--seed S]
"""
import argparse
import math
import pickle
import random


def stacks(rng, n):
    files = [f"/home/user/project/model_{i}.py" for i in range(8)]
    out = []
    for s in range(n):
        out.append([{"name": f"fn_{s}_{d}", "filename": rng.choice(files), "line": rng.randrange(1, 2000)}
                    for d in range(6)])
    return out


def frames(stack):
    return list(stack)


def events(rng, n, pool):
    live, out, addr, t = [], [], 0x7F0000000000, 0
    while len(out) < n:
        t += 1
        if live and (len(live) >= 2000 or rng.random() < 0.5):
            a, size, stack = live.pop(rng.randrange(len(live)))
            for action in ("free_requested", "free_completed"):
                out.append({"action": action, "addr": a, "size": size, "stream": 0, "time_us": t,
                            "frames": frames(stack)})
            continue
        size = int(math.exp(rng.uniform(math.log(512), math.log(64 << 20))))
        stack = rng.choice(pool)
        a, addr = addr, addr + ((size + 511) // 512) * 512
        live.append((a, size, stack))
        out.append({"action": "alloc", "addr": a, "size": size, "stream": 0, "time_us": t, "frames": frames(stack)})
    return out[:n]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    snap = {
        "segments": [],
        "device_traces": [events(rng, a.events, stacks(rng, 40))],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
                               "garbage_collection_threshold": 0.0, "expandable_segments": False},
    }
    with open(a.out, "wb") as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == "__main__":
    main()
