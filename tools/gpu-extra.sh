#!/usr/bin/env bash
# tools/gpu-extra.sh OUTDIR — follow-up checks for a GPU machine (see gpu-check.sh):
#   1. the benchmarks on a quiet many-core host (the build machines are shared
#      2-vCPU VMs, so their absolute figures swing with load);
#   2. the PyTorch comparison again with expandable segments on both sides
#      (PYTORCH_CUDA_ALLOC_CONF / GRT_ALLOC_CONF), exercising gpurt's expandable
#      segments on real VMM, plus a native expandable snapshot for fidelity.
# Each stage has a timeout; a failing stage does not stop the others.
set -uo pipefail
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
B=$(mktemp -d /tmp/gpurt-extra.XXXXXX)
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc_path")")}
stage() { local name=$1 limit=$2; shift 2; echo "=== [$name]"; timeout --kill-after=5 "$limit" "$@" 2>&1 | tee "$OUT/$name.txt"; echo "=== [$name] exit ${PIPESTATUS[0]}"; }
stage build 240 bash -c "cmake -S '$ROOT' -B '$B' -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRT_CUDA=ON -DGRT_BUILD_TESTS=OFF >/dev/null && cmake --build '$B' -j 16 | tail -2"
{
  echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
  echo "--- bench_index (W1/W2)"; timeout 120 "$B/bench/bench_index" --runs 5
  echo "--- bench_exec"; timeout 90 "$B/bench/bench_exec"
  echo "--- bench_graph"; timeout 90 "$B/bench/bench_graph"
  echo "--- bench_replay"; timeout 120 "$B/bench/bench_replay"
  echo "--- gpurt bench threads"; timeout 60 "$B/tools/gpurt" bench --only threads --iterations 2000000 --runs 3
} 2>&1 | tee "$OUT/quiet_bench.txt"
stage torch_expandable 200 env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True GRT_ALLOC_CONF=expandable_segments:True \
  python3 "$ROOT/tools/torch_alloc/train_compare.py" --lib "$B/tools/libgpurt_torch_alloc.so" --out "$OUT/expandable"
ls -la "$OUT" "$OUT/expandable" 2>/dev/null
