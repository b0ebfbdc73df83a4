#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan+UBSan) and runs each for the given
# number of seconds (default 60) on its saved seed corpus in fuzz/corpus/<reader>/.
# New inputs libFuzzer finds go to build/fuzz/work/<reader>/ (not the repository);
# crashes land in build/fuzz/crash-<reader>-*. Exits nonzero if any harness fails.
#   scripts/fuzz.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
bash scripts/deps.sh clang libclang-rt-14-dev
dir=build/fuzz
cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DGRT_FUZZ=ON -DGRT_SANITIZE=address,undefined \
  -DGRT_BUILD_TESTS=OFF -DGRT_BUILD_TOOLS=OFF -DGRT_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
for reader in native pytorch rmm minimalloc; do
  work="$dir/work/$reader"
  mkdir -p "$work"
  dict=()
  case $reader in
    native) dict=(-dict=fuzz/native.dict) ;;
    rmm|minimalloc) dict=(-dict=fuzz/csv.dict) ;;
  esac
  echo "== fuzz_$reader: ${secs}s"
  if ! "$dir/fuzz/fuzz_$reader" "$work" "fuzz/corpus/$reader" "${dict[@]}" \
      -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$dir/crash-$reader-" -print_final_stats=1 2>"$dir/fuzz_$reader.log"; then
    echo "fuzz_$reader FAILED: see $dir/fuzz_$reader.log" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$dir/fuzz_$reader.log" || true
done
exit $status
