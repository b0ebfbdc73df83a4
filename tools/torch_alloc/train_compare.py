#!/usr/bin/env python3
"""train_compare.py — trains a small transformer with PyTorch's own CUDA caching
allocator and with gpurt's (libgpurt_torch_alloc.so via CUDAPluggableAllocator),
each in a fresh process, and reports peak reserved, peak allocated, ms per step
and device malloc count side by side. A third process records a memory
snapshot of the same workload with the native allocator
(torch.cuda.memory._record_memory_history / _dump_snapshot).

usage: train_compare.py --lib build/tools/libgpurt_torch_alloc.so --out OUTDIR
       [--steps 30] [--snapshot-steps 8] [--child-timeout 100]
Exit: 0 ok, 1 a run failed, 3 skipped (no torch or no GPU).
"""
import argparse
import json
import os
import pickle
import subprocess
import sys
import time

SNAPSHOT_NAME = "gpurt_transformer_snapshot.pickle"
SNAPSHOT_LIMIT = 15 << 20  # the GPU check brings back files up to 16 MiB


def workload(torch, steps, on_step=None):
    """A 6-layer encoder LM on random tokens; the sequence length drifts step to
    step (128..512) so the allocator sees varying sizes, as real training does."""
    torch.manual_seed(0)
    dev = torch.device("cuda", 0)
    vocab, d_model, batch = 8192, 512, 16
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead=8, dim_feedforward=2048, dropout=0.1, batch_first=True)
    model = torch.nn.ModuleDict({
        "emb": torch.nn.Embedding(vocab, d_model),
        "enc": torch.nn.TransformerEncoder(layer, num_layers=6, enable_nested_tensor=False),
        "head": torch.nn.Linear(d_model, vocab),
    }).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seqs = [128, 256, 384, 512, 320, 192, 448, 256]
    gen = torch.Generator(device="cpu").manual_seed(1)
    times, losses = [], []
    for step in range(steps):
        seq = seqs[step % len(seqs)]
        tokens = torch.randint(0, vocab, (batch, seq + 1), generator=gen).to(dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        h = model["enc"](model["emb"](tokens[:, :-1]))
        logits = model["head"](h)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000.0)
        losses.append(float(loss.item()))
        if on_step:
            on_step(step)
    return times, losses


def summarize_times(times, warmup):
    t = sorted(times[warmup:] or times)
    return {"ms_per_step_median": t[len(t) // 2], "ms_per_step_mean": sum(t) / len(t), "timed_steps": len(t)}


def child(args):
    try:
        import torch
    except ImportError as e:
        print(f"RESULT {json.dumps({'mode': args.child, 'error': f'torch not importable: {e}'})}")
        return 3
    out = {"mode": args.child, "torch": torch.__version__}
    lib = None
    if args.child == "gpurt":
        import ctypes
        lib = ctypes.CDLL(os.path.abspath(args.lib))
        alloc = torch.cuda.memory.CUDAPluggableAllocator(os.path.abspath(args.lib), "gpurt_alloc", "gpurt_free")
        torch.cuda.memory.change_current_allocator(alloc)  # before any CUDA allocation
    if args.child == "snapshot":
        try:
            torch.cuda.memory._record_memory_history(max_entries=100000, stacks="python")
        except TypeError:
            torch.cuda.memory._record_memory_history(max_entries=100000)
    steps = args.snapshot_steps if args.child == "snapshot" else args.steps
    times, losses = workload(torch, steps)
    out.update(summarize_times(times, warmup=min(5, steps // 3)))
    out["loss_first"], out["loss_last"] = losses[0], losses[-1]
    out["device_name"] = torch.cuda.get_device_name(0)
    if args.child in ("native", "snapshot"):
        st = torch.cuda.memory_stats()
        out["peak_reserved"] = torch.cuda.max_memory_reserved()
        out["peak_allocated"] = torch.cuda.max_memory_allocated()
        out["device_mallocs"] = st.get("num_device_alloc")
        out["device_frees"] = st.get("num_device_free")
        out["alloc_retries"] = st.get("num_alloc_retries")
    if args.child == "gpurt":
        buf = ctypes.create_string_buffer(4096)
        n = lib.gpurt_stats_json(0, buf, ctypes.c_size_t(len(buf)))
        s = json.loads(buf.value.decode()) if n > 0 else {}
        out["gpurt_stats"] = s
        out["peak_reserved"] = s.get("reserved_peak")
        out["peak_allocated"] = s.get("allocated_peak")
        out["device_mallocs"] = s.get("num_device_alloc")
        out["device_frees"] = s.get("num_device_free")
        out["alloc_retries"] = s.get("num_alloc_retries")
    if args.child == "snapshot":
        path = os.path.join(args.out, SNAPSHOT_NAME)
        torch.cuda.memory._dump_snapshot(path)
        torch.cuda.memory._record_memory_history(enabled=None)
        out["snapshot"] = path
        out["snapshot_bytes"] = shrink_snapshot(path)
    print(f"RESULT {json.dumps(out)}", flush=True)
    return 0


def shrink_snapshot(path):
    """Drops stack frames if the pickle is too large to bring back; returns its size."""
    size = os.path.getsize(path)
    if size <= SNAPSHOT_LIMIT:
        return size
    with open(path, "rb") as f:
        snap = pickle.load(f)
    for seg in snap.get("segments", []):
        seg["frames"] = []
        for blk in seg.get("blocks", []):
            blk["frames"] = []
    for trace in snap.get("device_traces", []):
        for ev in trace:
            ev["frames"] = []
    with open(path, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    return os.path.getsize(path)


def run_child(mode, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, "--lib", args.lib, "--out", args.out,
           "--steps", str(args.steps), "--snapshot-steps", str(args.snapshot_steps)]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.child_timeout)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "error": f"timed out after {args.child_timeout}s"}
    res = None
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            res = json.loads(line[len("RESULT "):])
    if res is None:
        tail = (p.stderr or p.stdout)[-1500:]
        res = {"mode": mode, "error": f"exit {p.returncode}, no result; stderr tail:\n{tail}"}
    elif p.returncode != 0 and "error" not in res:
        res["error"] = f"exit {p.returncode}"
    if p.stderr.strip() and "error" not in res:
        res["stderr_tail"] = p.stderr[-600:]
    res["wall_s"] = round(time.time() - t0, 1)
    return res


def mib(v):
    return "-" if v is None else f"{v / 2**20:.1f} MiB"


def report(native, gpurt, snap):
    rows = [("peak reserved", mib(native.get("peak_reserved")), mib(gpurt.get("peak_reserved"))),
            ("peak allocated", mib(native.get("peak_allocated")), mib(gpurt.get("peak_allocated"))),
            ("ms/step (median)", f"{native.get('ms_per_step_median', float('nan')):.2f}",
             f"{gpurt.get('ms_per_step_median', float('nan')):.2f}"),
            ("ms/step (mean)", f"{native.get('ms_per_step_mean', float('nan')):.2f}",
             f"{gpurt.get('ms_per_step_mean', float('nan')):.2f}"),
            ("device mallocs", str(native.get("device_mallocs")), str(gpurt.get("device_mallocs"))),
            ("device frees", str(native.get("device_frees")), str(gpurt.get("device_frees"))),
            ("alloc retries", str(native.get("alloc_retries")), str(gpurt.get("alloc_retries"))),
            ("loss first -> last", f"{native.get('loss_first', 0):.4f} -> {native.get('loss_last', 0):.4f}",
             f"{gpurt.get('loss_first', 0):.4f} -> {gpurt.get('loss_last', 0):.4f}")]
    print(f"## PyTorch allocator vs gpurt caching allocator ({native.get('device_name', '?')}, "
          f"torch {native.get('torch', '?')})\n")
    print("| metric | PyTorch native | gpurt |\n|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")
    for res in (native, gpurt, snap):
        if "error" in res:
            print(f"\n{res['mode']}: ERROR: {res['error']}")
    if "snapshot" in snap:
        print(f"\nsnapshot: {snap['snapshot']} ({snap['snapshot_bytes']} bytes, native allocator, "
              f"{snap.get('timed_steps', '?')} timed steps)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", default="build/tools/libgpurt_torch_alloc.so")
    ap.add_argument("--out", default="out")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--snapshot-steps", type=int, default=8)
    ap.add_argument("--child-timeout", type=int, default=100)
    ap.add_argument("--child", choices=["native", "gpurt", "snapshot"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    try:
        import torch
    except ImportError as e:
        print(f"train_compare: SKIPPED: PyTorch is not installed here ({e})")
        return 3
    if not torch.cuda.is_available():
        print("train_compare: SKIPPED: torch.cuda.is_available() is False (no GPU or no CUDA driver)")
        return 3
    if not os.path.exists(args.lib):
        print(f"train_compare: FAILED: {args.lib} does not exist (build the gpurt_torch_alloc target)")
        return 1
    os.makedirs(args.out, exist_ok=True)
    native = run_child("native", args)
    gpurt = run_child("gpurt", args)
    snap = run_child("snapshot", args)
    report(native, gpurt, snap)
    with open(os.path.join(args.out, "torch_compare.json"), "w") as f:
        json.dump({"native": native, "gpurt": gpurt, "snapshot": snap}, f, indent=1)
    return 1 if any("error" in r for r in (native, gpurt, snap)) else 0


if __name__ == "__main__":
    sys.exit(main())
