#!/usr/bin/env bash
# test_stats_stream.sh — `gpurt stats` streams a trace in a format read row
# by row (native, RMM CSV) through the replay (memory follows the live
# allocations, not the events) when it is a file over 32 MiB, standard input,
# a pipe or compressed, and prints what the loaded replay prints: a small
# trace loaded from its file and streamed from a pipe gives identical
# statistics, a big one identical statistics from its file, a pipe and a zstd
# file, and no streamed run's peak RSS comes near the file's size (plain
# builds: sanitizers inflate the RSS).
set -euo pipefail
GPURT=${1:?usage: test_stats_stream.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 1.6M events over 4 streams; at most 64 allocations live at any time
awk 'BEGIN { print "gpurt-trace 1"
  for (i = 1; i <= 800000; i++) {
    printf "alloc %d %d %d\n", i, 512 * (1 + i % 97), i % 4
    if (i > 64) printf "free_completed %d %d %d\n", i - 64, 512 * (1 + (i - 64) % 97), (i - 64) % 4
  } }' >"$tmp/big.trace"
size=$(stat -c %s "$tmp/big.trace")
[ "$size" -gt $((32 << 20)) ] || fail "the trace is $size bytes: too small to stream"

DATA=$(dirname "$0")/data
for trace in "$DATA/native_small.trace" "$DATA/rmm_small.csv"; do
  "$GPURT" stats "$trace" --format json >"$tmp/loaded.json"
  cat "$trace" | "$GPURT" stats - --format json >"$tmp/piped.json"
  cmp -s "$tmp/loaded.json" "$tmp/piped.json" || fail "$(basename "$trace"): loaded and piped differ"
done
echo "ok: a small trace loaded from its file and read from a pipe gives the same statistics"
command -v zstd >/dev/null || fail "zstd is not installed (scripts/deps.sh installs it)"
zstd -q -c "$tmp/big.trace" >"$tmp/big.zst"
for format in json summary prometheus; do
  "$GPURT" stats "$tmp/big.trace" --format "$format" >"$tmp/streamed.$format"
  "$GPURT" stats - --format "$format" <"$tmp/big.trace" >"$tmp/stdin.$format"
  "$GPURT" stats "$tmp/big.zst" --format "$format" >"$tmp/zst.$format"
  for other in stdin zst; do
    cmp -s "$tmp/streamed.$format" "$tmp/$other.$format" ||
      fail "--format $format: the file and $other differ: $(diff "$tmp/streamed.$format" "$tmp/$other.$format" | head -5)"
  done
done
# an RMM CSV over 32 MiB streams too (the pointer names the allocation)
awk 'BEGIN { print "Thread,Time,Action,Pointer,Size,Stream"
  for (i = 1; i <= 400000; i++) {
    printf "140000,00:00:01.%06d,allocate,0x%x,%d,0x%x\n", i % 1000000, 4096 * i, 512 * (1 + i % 97), i % 4
    if (i > 64) printf "140000,00:00:01.%06d,free,0x%x,%d,0x%x\n", i % 1000000, 4096 * (i - 64), 512 * (1 + (i - 64) % 97), (i - 64) % 4
  } }' >"$tmp/big.csv"
[ "$(stat -c %s "$tmp/big.csv")" -gt $((32 << 20)) ] || fail "the RMM trace is too small to stream"
"$GPURT" stats "$tmp/big.csv" --format json >"$tmp/csv.json"
grep -q '"allocation.all.allocated": 400000' "$tmp/csv.json" || fail "RMM: not every allocate was replayed"
grep -q '"allocation.all.current": 64' "$tmp/csv.json" || fail "RMM: 64 allocations should be live at the end"
grep -q '"allocation.all.allocated": 800000' "$tmp/streamed.json" || fail "not every event was replayed"
grep -q '"allocation.all.current": 64' "$tmp/streamed.json" || fail "64 allocations should be live at the end"
echo "ok: stats streams a big native file and prints what the loaded replay prints"

if grep -qE '^GRT_SANITIZE:STRING=.+' "$(dirname "$GPURT")/../CMakeCache.txt" 2>/dev/null; then
  echo "note: the RSS bound is not checked in a sanitizer build"
  exit 0
fi
command -v python3 >/dev/null || fail "python3 is not installed (scripts/deps.sh installs it)"
for input in "$tmp/big.trace" "$tmp/big.zst" - "$tmp/big.csv"; do
  rss=$(python3 - "$GPURT" "$input" "$tmp/big.trace" <<'PY'
import resource, subprocess, sys
with open(sys.argv[3], "rb") as f:
    subprocess.run([sys.argv[1], "stats", sys.argv[2], "--format", "json"], check=True, stdin=f,
                   stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
  )
  # loading it whole peaks near 100 MiB; a streamed run holds 64 blocks (the
  # figure includes the forked Python's own pages)
  [ "$rss" -lt 32768 ] || fail "streamed stats of $input peaked at $rss KiB for a $size-byte trace"
  echo "ok: streamed stats of $(basename -- "$input") peaks at $rss KiB for a $((size >> 20)) MiB trace"
done
