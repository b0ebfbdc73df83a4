#!/usr/bin/env bash
# Line and branch coverage of src/ under the test suite (gcc --coverage + gcovr).
# Builds into build/coverage, runs every CTest test, prints gcovr's per-file
# table and the totals, and fails when the totals are below the floor.
#   scripts/coverage.sh                    enforce the floor (90% lines, 80% branches)
#   scripts/coverage.sh --report-only      print the figures, never fail on them
#   GRT_COV_LINES=85 GRT_COV_BRANCHES=75 scripts/coverage.sh    another floor
#   scripts/coverage.sh --lines 85 --branches 75                 the same
# GRT_COV_REPORT_ONLY=1 is the environment form of --report-only. Extra
# outputs: build/coverage/coverage.txt (the table), coverage.json (gcovr summary).
set -euo pipefail
cd "$(dirname "$0")/.."
lines=${GRT_COV_LINES:-90}
branches=${GRT_COV_BRANCHES:-80}
report_only=${GRT_COV_REPORT_ONLY:-0}
while [ $# -gt 0 ]; do
  case $1 in
    --report-only) report_only=1 ;;
    --lines) lines=$2; shift ;;
    --branches) branches=$2; shift ;;
    *) echo "usage: scripts/coverage.sh [--report-only] [--lines PCT] [--branches PCT]" >&2; exit 2 ;;
  esac
  shift
done
bash scripts/deps.sh gcovr
dir=build/coverage
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGRT_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="--coverage -O0 -fprofile-update=atomic" -DCMAKE_EXE_LINKER_FLAGS="--coverage" \
  -DCMAKE_SHARED_LINKER_FLAGS="--coverage" >/dev/null
cmake --build "$dir"
find "$dir" -name '*.gcda' -delete # counts from this run only
ctest --test-dir "$dir" --output-on-failure -j "$(nproc)"
# -fprofile-update=atomic: the threaded tests would otherwise race on the
# counters (negative branch counts that gcovr refuses).
# Branches: gcovr's --exclude-unreachable-branches drops the compiler's own
# branches on lines with no code of ours; --exclude-throw-branches is C++ only.
gcovr_args=(--root . --filter 'src/' --object-directory "$dir" --exclude-unreachable-branches
  --gcov-exclude '.*CMakeCCompilerId.*'
  --print-summary --json-summary "$dir/coverage.json")
gcovr "${gcovr_args[@]}" --txt "$dir/coverage.txt" >"$dir/summary.txt"
cat "$dir/coverage.txt"
python3 - "$dir/coverage.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
print("%-40s %7s %17s" % ("file (branches, fewest covered first)", "lines", "branches"))
for f in sorted(s["files"], key=lambda f: f["branch_covered"] - f["branch_total"]):
    # a file with no branches (a header of inline helpers) has branch_percent null
    print("%-40s %6.1f%% %6d/%-5d %5.1f%%" % (f["filename"], f["line_percent"] or 0.0, f["branch_covered"],
                                           f["branch_total"], f["branch_percent"] or 0.0))
PY
cat "$dir/summary.txt"
read -r lpct bpct < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(s["line_percent"], s["branch_percent"])' "$dir/coverage.json")
echo "coverage of src/: lines ${lpct}% (floor ${lines}%), branches ${bpct}% (floor ${branches}%)"
fail=0
awk -v a="$lpct" -v b="$lines" 'BEGIN { exit !(a + 0 < b + 0) }' && { echo "line coverage below ${lines}%" >&2; fail=1; }
awk -v a="$bpct" -v b="$branches" 'BEGIN { exit !(a + 0 < b + 0) }' && { echo "branch coverage below ${branches}%" >&2; fail=1; }
if [ "$fail" = 1 ] && [ "$report_only" = 1 ]; then
  echo "(report-only: not failing)"
  exit 0
fi
exit $fail
