#!/usr/bin/env bash
# Builds and runs every test. With an argument, builds under sanitizers:
#   scripts/test.sh            plain build (RelWithDebInfo)
#   scripts/test.sh asan       AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/test.sh tsan       ThreadSanitizer
#   scripts/test.sh clang      clang, every warning an error: clang marks the
#                              grt_status type itself, so a dropped status in
#                              any function (static ones too) fails the build
# In CI (CI set in the environment) every build treats warnings as errors
# (CMakeLists.txt: GRT_WERROR defaults to ON there).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-plain}
extra=()
[ "$mode" = clang ] && extra=(clang)
bash scripts/deps.sh "${extra[@]}"
# the browser tests' driver (playwright-core, pinned in tests/browser/package-lock.json)
if command -v npm >/dev/null && { [ ! -d tests/browser/node_modules/playwright-core ] ||
    [ tests/browser/package-lock.json -nt tests/browser/node_modules ]; }; then
  (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error) ||
    echo "test.sh: npm ci in tests/browser failed: the browser tests are skipped" >&2
fi
case "$mode" in
  plain) dir=build/test; flags=() ;;
  asan) dir=build/asan; flags=(-DGRT_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug) ;;
  tsan) dir=build/tsan; flags=(-DGRT_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo) ;;
  clang) dir=build/clang; flags=(-DCMAKE_C_COMPILER=clang -DGRT_WERROR=ON) ;;
  *) echo "usage: scripts/test.sh [plain|asan|tsan|clang]" >&2; exit 2 ;;
esac
[ -n "${CI:-}" ] && flags+=(-DGRT_WERROR=ON) # also over a build folder configured before
cmake -S . -B "$dir" -G Ninja "${flags[@]}" >/dev/null
cmake --build "$dir"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
label=()
[ "$mode" = tsan ] && label=(-L threads)
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)" "${label[@]}"
