#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan+UBSan) and runs each on its saved
# seed corpus in fuzz/corpus/<harness>/: the trace readers (native, pytorch,
# rmm, minimalloc), the safetensors header reader and alloc_api (sequences of
# allocator and device calls).
# New inputs libFuzzer finds go to build/fuzz/work/<harness>/ (not the
# repository); crashes land in build/fuzz/crash-<harness>-*. Exits nonzero if
# any harness fails. Each harness prints its executed-units count.
#   scripts/fuzz.sh [seconds]            every harness for that long (default 60)
#   scripts/fuzz.sh --runs N [jobs]      every harness for N executions, split over
#                                        `jobs` parallel workers (default: nproc);
#                                        the 10,000,000-execution run is --runs 10000000
#   scripts/fuzz.sh --smoke [seconds]    CI: every harness briefly (default 15 s) on
#                                        the saved corpus only (nothing written to it)
#   GRT_FUZZ_HARNESSES="alloc_api rmm"   limit the harnesses
#   GRT_FUZZ_MAX_LEN=256                 cap the input length (bytes) for this run: an
#                                        execution costs about its length (alloc_api:
#                                        256 bytes run ~3,000/s on one core, 2,048 ~1,000/s)
#   GRT_FUZZ_PREBUILT=1                  skip the dependency check and the build:
#                                        run the binaries already in build/fuzz/fuzz/
#                                        (alloc_api: build/fuzz-edge/fuzz/)
#                                        (e.g. copied to a bigger machine)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=time secs=60 runs=0 jobs=$(nproc)
case "${1:-}" in
  --runs) mode=runs; runs=${2:?--runs needs a count}; jobs=${3:-$jobs} ;;
  --smoke) mode=smoke; secs=${2:-15} ;;
  "") ;;
  *) secs=$1 ;;
esac
harnesses=(${GRT_FUZZ_HARNESSES:-native pytorch rmm minimalloc safetensors alloc_api})
dir=build/fuzz
# alloc_api is built separately with edge coverage only (no comparison
# tracing): its bytes pick calls and sizes, which the comparison hints of
# -fsanitize=fuzzer barely steer, and the tracing hooks on every comparison in
# the allocator made it 3-4x slower (~600 against ~2,000 executions/s). The
# trace readers keep comparison tracing: it finds their keywords and magic values.
edge=build/fuzz-edge
configure() { # build dir, extra C flags
  cmake -S . -B "$1" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGRT_FUZZ=ON -DGRT_SANITIZE=address,undefined -DCMAKE_C_FLAGS="$2" \
    -DGRT_BUILD_TESTS=OFF -DGRT_BUILD_TOOLS=OFF -DGRT_BUILD_BENCH=OFF >/dev/null
}
if [ "${GRT_FUZZ_PREBUILT:-0}" != 1 ]; then
  bash scripts/deps.sh clang libclang-rt-14-dev
  configure "$dir" ""
  cmake --build "$dir"
  configure "$edge" "-fno-sanitize-coverage=trace-cmp"
  cmake --build "$edge" --target fuzz_alloc_api
fi
bin() { [ "$1" = alloc_api ] && echo "$edge/fuzz/fuzz_$1" || echo "$dir/fuzz/fuzz_$1"; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for h in "${harnesses[@]}"; do
  work="$dir/work/$h"
  mkdir -p "$work"
  dict=()
  case $h in
    native) dict=(-dict=fuzz/native.dict) ;;
    rmm|minimalloc) dict=(-dict=fuzz/csv.dict) ;;
  esac
  maxlen=65536
  [ "$h" = alloc_api ] && maxlen=2048 # at most 256 calls are read anyway
  maxlen=${GRT_FUZZ_MAX_LEN:-$maxlen}
  common=(-max_len=$maxlen -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$dir/crash-$h-" -print_final_stats=1)
  log="$dir/fuzz_$h.log"
  case $mode in
    time)
      echo "== fuzz_$h: ${secs}s"
      cmd=("$(bin "$h")" "$work" "fuzz/corpus/$h" "${dict[@]}" -max_total_time="$secs" "${common[@]}") ;;
    smoke) # the saved corpus is read, not extended: a scratch dir takes new inputs
      echo "== fuzz_$h: smoke ${secs}s on fuzz/corpus/$h"
      rm -rf "$dir/smoke/$h" && mkdir -p "$dir/smoke/$h"
      cmd=("$(bin "$h")" "$dir/smoke/$h" "fuzz/corpus/$h" "${dict[@]}" -max_total_time="$secs" "${common[@]}") ;;
    runs) # -jobs workers, each -runs=N/jobs; fork mode keeps one shared corpus
      per=$(( (runs + jobs - 1) / jobs ))
      echo "== fuzz_$h: $runs executions ($jobs workers x $per)"
      cmd=("$(bin "$h")" "$work" "fuzz/corpus/$h" "${dict[@]}" -runs="$per" -jobs="$jobs" -workers="$jobs"
        "${common[@]}") ;;
  esac
  start=$(date +%s)
  if [ "$mode" = runs ]; then
    # each worker writes fuzz-<n>.log in the current directory: run inside $dir/jobs-$h
    rm -rf "$dir/jobs-$h" && mkdir -p "$dir/jobs-$h"
    root=$PWD
    abs=("${cmd[@]/#$dir/$root/$dir}")
    abs=("${abs[@]/#fuzz\/corpus/$root/fuzz/corpus}")
    abs=("${abs[@]/#-dict=fuzz/-dict=$root/fuzz}")
    abs=("${abs[@]/#-artifact_prefix=$dir/-artifact_prefix=$root/$dir}")
    if ! (cd "$dir/jobs-$h" && "${abs[@]}" >"$root/$log" 2>&1); then
      echo "fuzz_$h FAILED: see $log and $dir/jobs-$h/fuzz-*.log" >&2
      status=1
    fi
    total=$(cat "$dir"/jobs-"$h"/fuzz-*.log | sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
    echo "stat::number_of_executed_units: $total (all workers, $(( $(date +%s) - start )) s)"
    continue
  fi
  if ! "${cmd[@]}" 2>"$log"; then
    echo "fuzz_$h FAILED: see $log" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$log" || true
done
exit $status
