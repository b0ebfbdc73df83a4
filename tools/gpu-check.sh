#!/usr/bin/env bash
# tools/gpu-check.sh OUTDIR — the CUDA backend's checks on a machine with one
# NVIDIA GPU, PyTorch, nvcc, CMake and ninja (no network, no cmocka needed).
#
# Stages (each with its own timeout; a failing stage does not stop the rest):
#   env          GPU, driver, nvcc, torch versions             -> OUTDIR/env.txt
#   build        CUDA backend, gpurt-conformance, torch plugin -> OUTDIR/build.log
#   conformance  semantic cases on sim and CUDA                -> OUTDIR/conformance.md
#                (its "device model" row answers whether cudaMalloc needs
#                contiguous free memory; the summary repeats its CUDA cell)
#   load         a 1 GiB safetensors file to the GPU by every
#                method, cold, against a pinned H2D copy's
#                bandwidth (PCIe's bound, measured by torch)   -> OUTDIR/load.txt
#                (needs jansson and liburing; not run without them)
#   torch        native vs gpurt allocator on a transformer,
#                plus a native memory snapshot                 -> OUTDIR/torch_compare.txt,
#                                                                 torch_compare.json,
#                                                                 gpurt_transformer_snapshot.pickle
# Ends with one summary block (also OUTDIR/summary.txt). Worst case ~9.5 min.
# Exit: 0 when every stage passed, 1 otherwise.
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: tools/gpu-check.sh OUTDIR" >&2
  exit 2
fi
mkdir -p "$1"
OUT=$(cd "$1" && pwd)
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=$(mktemp -d "${TMPDIR:-/tmp}/gpurt-gpu-build.XXXXXX")
export ROOT BUILD
T0=$(date +%s)
declare -A STATUS SECS
ORDER=()

# run_stage NAME TIMEOUT_S LOGFILE CMD...: runs CMD under timeout, tee'ing into LOGFILE.
run_stage() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t=$(date +%s) rc
  echo "=== [$name] $(date -u +%H:%M:%S) (limit ${limit}s)"
  # Shell functions run through `bash -c` (timeout needs a program).
  if declare -F "$1" >/dev/null; then
    timeout --kill-after=10 "$limit" bash -c "$(declare -f "$1"); $1" 2>&1 | tee "$log"
  else
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$log"
  fi
  rc=${PIPESTATUS[0]}
  SECS[$name]=$(($(date +%s) - t))
  case $rc in
    0) STATUS[$name]=ok ;;
    3) STATUS[$name]="skipped" ;;
    124|137) STATUS[$name]="TIMEOUT after ${limit}s" ;;
    *) STATUS[$name]="FAILED (exit $rc)" ;;
  esac
  ORDER+=("$name")
  echo "=== [$name] ${STATUS[$name]} in ${SECS[$name]}s"
}

env_info() {
  echo "date: $(date -u)"
  echo "host: $(uname -a)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
  (command -v nvcc >/dev/null && nvcc --version | tail -2) || /usr/local/cuda/bin/nvcc --version 2>&1 | tail -2
  cmake --version | head -1
  ninja --version
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' 2>&1
  echo "git: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
}

build() {
  # cuda.h: CUDA_HOME, else the toolkit around nvcc, else /usr/local/cuda (CMake's hints).
  local nvcc_path
  nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  export CUDA_HOME=${CUDA_HOME:-$(dirname "$(dirname "$nvcc_path")")}
  echo "CUDA_HOME=$CUDA_HOME"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRT_CUDA=ON \
    -DGRT_BUILD_TESTS=OFF -DGRT_BUILD_BENCH=OFF -DGRT_BUILD_TOOLS=ON &&
    cmake --build "$BUILD" --target gpurt-conformance gpurt_torch_alloc &&
    { cmake --build "$BUILD" --target gpurt_cli || echo "build: no gpurt CLI: the load stage is skipped"; }
}

# The weights to the GPU by every method (cold), beside PCIe's bound: a pinned
# 1 GiB host-to-device copy timed by torch. Files in $BUILD, results in load.txt.
load_stage() {
  python3 - "$BUILD/weights.safetensors" <<'PY' || return 1
import json, struct, sys, random
rng, t, off = random.Random(1), {}, 0
sizes = [64 << 20, 16 << 20, 4 << 20, 1 << 20]
with open(sys.argv[1], "wb") as f:
    i = 0
    while off < (1 << 30):
        n = sizes[i % 4]; t[f"w{i}"] = {"dtype": "F16", "shape": [n // 2], "data_offsets": [off, off + n]}; off += n; i += 1
    h = json.dumps(t).encode(); h += b" " * ((8 - len(h) % 8) % 8)
    f.write(struct.pack("<Q", len(h))); f.write(h)
    for k in range(i):
        f.write(rng.randbytes(sizes[k % 4]))
PY
  python3 -c 'import torch,time
x=torch.empty(1<<30,dtype=torch.uint8).pin_memory(); y=torch.empty(1<<30,dtype=torch.uint8,device="cuda")
y.copy_(x,non_blocking=True); torch.cuda.synchronize(); t=time.perf_counter(); y.copy_(x,non_blocking=True); torch.cuda.synchronize()
print("pcie bound (pinned H2D, torch): %.2f GB/s" % ((1<<30)/(time.perf_counter()-t)/1e9))' || echo "pcie bound: torch unavailable"
  local m
  for m in iouring pread mmap naive; do
    "$BUILD/tools/gpurt" load "$BUILD/weights.safetensors" --gpu 0 --cold --method "$m" --buffers 8 --depth 8 || return 1
  done
}

# Progress lines (stderr) stay out of the markdown; shown in the summary if the stage fails.
conformance() { "$BUILD/tools/gpurt-conformance" 2>"$BUILD/conformance.progress"; }

run_stage env 30 "$OUT/env.txt" env_info
run_stage build 120 "$OUT/build.log" build
if [ -x "$BUILD/tools/gpurt-conformance" ]; then
  run_stage conformance 90 "$OUT/conformance.md" conformance
else
  STATUS[conformance]="not run (no binary)"; SECS[conformance]=0; ORDER+=(conformance)
fi
if [ -x "$BUILD/tools/gpurt" ] && "$BUILD/tools/gpurt" load --help >/dev/null 2>&1 &&
   ! "$BUILD/tools/gpurt" load --help 2>&1 | grep -q "has no loader"; then
  run_stage load 120 "$OUT/load.txt" load_stage
else
  STATUS[load]="not run (gpurt built without the loader: jansson, liburing)"; SECS[load]=0; ORDER+=(load)
fi
if [ -f "$BUILD/tools/libgpurt_torch_alloc.so" ]; then
  run_stage torch 240 "$OUT/torch_compare.txt" python3 "$ROOT/tools/torch_alloc/train_compare.py" \
    --lib "$BUILD/tools/libgpurt_torch_alloc.so" --out "$OUT" --child-timeout 75
else
  STATUS[torch]="not run (no plugin library)"; SECS[torch]=0; ORDER+=(torch)
fi

{
  echo
  echo "================ gpurt GPU check summary ================"
  echo "git $(git rev-parse --short HEAD 2>/dev/null || echo '?'), total $(($(date +%s) - T0))s, out: $OUT"
  grep -m1 -E 'H[0-9]+|NVIDIA' "$OUT/env.txt" 2>/dev/null | sed 's/^/gpu: /'
  grep -m1 '^torch' "$OUT/env.txt" 2>/dev/null
  for s in "${ORDER[@]}"; do printf '%-12s %-28s %4ss\n' "$s" "${STATUS[$s]}" "${SECS[$s]}"; done
  if [ -f "$OUT/conformance.md" ]; then
    grep -m1 '^- cuda:' "$OUT/conformance.md"
    grep -m1 'case(s),' "$OUT/conformance.md"
    # The device-model answer (docs/CONFORMANCE.md, "Device model"): the row's number and its cuda cell.
    awk -F'|' '/^\| [0-9]+ \| device model/ { n = $2; gsub(/ /, "", n); print "device model (case " n "), cuda:" $(NF - 1); exit }' \
      "$OUT/conformance.md"
    grep -E '\*\*FAIL\*\*' "$OUT/conformance.md" | cut -c1-400
    [ "${STATUS[conformance]}" = ok ] || tail -5 "$BUILD/conformance.progress" 2>/dev/null
  fi
  if [ -f "$OUT/load.txt" ]; then
    grep -E 'pcie bound|GB/s|gpurt load:' "$OUT/load.txt" | sed 's/^ */load: /'
  fi
  if [ -f "$OUT/torch_compare.txt" ]; then
    grep -E '^\| |ERROR|SKIPPED|FAILED|^snapshot' "$OUT/torch_compare.txt"
  fi
  [ -f "$OUT/build.log" ] && [ "${STATUS[build]}" != ok ] && tail -15 "$OUT/build.log"
  ls -l "$OUT" | tail -n +2 | awk '{print "file:", $NF, $5, "bytes"}'
  echo "=========================================================="
} | tee "$OUT/summary.txt"
rm -rf "$BUILD"
for s in "${ORDER[@]}"; do [ "${STATUS[$s]}" = ok ] || exit 1; done
exit 0
