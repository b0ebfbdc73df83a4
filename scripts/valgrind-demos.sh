#!/usr/bin/env bash
# Runs every demo of `gpurt demo --help` under Valgrind memcheck: any memory
# error or leak fails the script (--error-exitcode=1, --leak-check=full,
# definite and indirect leaks count as errors). Builds a plain Debug CLI in
# build/valgrind (no sanitizers: Valgrind and ASan do not mix).
#   scripts/valgrind-demos.sh [demo ...]     (default: every listed demo)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh valgrind
dir=build/valgrind
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGRT_BUILD_TESTS=OFF -DGRT_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" --target gpurt_cli
cli="$dir/tools/gpurt"
if [ $# -gt 0 ]; then
  demos=("$@")
else
  # the demo table's names: two-space indented lines after "demos:", except "all"
  mapfile -t demos < <("$cli" demo --help | awk '/^demos:/ {on = 1; next} on && /^  [a-z]/ {print $1}' | grep -vx all)
fi
[ ${#demos[@]} -gt 0 ] || { echo "valgrind-demos: no demos listed by '$cli demo --help'" >&2; exit 1; }
status=0
for d in "${demos[@]}"; do
  echo "== valgrind: gpurt demo $d"
  log="$dir/valgrind-$d.log"
  if valgrind --error-exitcode=1 --leak-check=full --show-leak-kinds=definite,indirect \
      --errors-for-leak-kinds=definite,indirect --track-origins=yes --log-file="$log" \
      "$cli" demo "$d" >/dev/null; then
    grep -E "ERROR SUMMARY|definitely lost|indirectly lost|All heap blocks" "$log" | sed 's/^==[0-9]*== /   /'
  else
    echo "gpurt demo $d FAILED under valgrind: see $log" >&2
    tail -40 "$log" >&2
    status=1
  fi
done
exit $status
