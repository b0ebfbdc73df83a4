#!/usr/bin/env bash
# test_report_stats_cli.sh — `gpurt stats TRACE` in each format on the small
# traces kept in tests/data, `gpurt stats` (dayshift) unchanged, and the
# option checks of `stats` and `replay --serve`. Needs nothing beyond bash.
set -uo pipefail
GPURT=${1:?usage: test_report_stats_cli.sh PATH/TO/gpurt}
DATA=$(dirname "$0")/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for trace in "$DATA/rmm_small.csv" "$DATA/native_small.trace" "$DATA/minimalloc_small.csv"; do
  name=$(basename "$trace")
  "$GPURT" stats "$trace" >"$tmp/summary.txt" || fail "stats $name"
  grep -q "PyTorch CUDA memory summary, device ID 0" "$tmp/summary.txt" || fail "$name: no summary header"
  grep -q "^| Largest free block " "$tmp/summary.txt" || fail "$name: no largest free block line"
  "$GPURT" stats "$trace" --abbreviated >"$tmp/abbr.txt" || fail "stats $name --abbreviated"
  [ "$(wc -l <"$tmp/abbr.txt")" -lt "$(wc -l <"$tmp/summary.txt")" ] || fail "$name: --abbreviated is not shorter"
  "$GPURT" stats "$trace" --format json >"$tmp/stats.json" || fail "stats $name --format json"
  grep -q '"allocated_bytes.all.allocated": [1-9]' "$tmp/stats.json" || fail "$name: json lacks allocations"
  "$GPURT" stats "$trace" --format snapshot >"$tmp/snap.json" || fail "stats $name --format snapshot"
  grep -q '^{"segments": \[' "$tmp/snap.json" || fail "$name: snapshot is not memory._snapshot()-shaped"
  "$GPURT" stats "$trace" --format prometheus >"$tmp/metrics.txt" || fail "stats $name --format prometheus"
  grep -q '^gpurt_alloc_largest_free_block_bytes{device="0",allocator="caching",pool="all"} [0-9]' \
    "$tmp/metrics.txt" || fail "$name: prometheus lacks largest_free_block"
  command -v jq >/dev/null || fail "jq is not installed (scripts/deps.sh installs it)"
  jq -e 'type == "object"' "$tmp/stats.json" >/dev/null || fail "$name: json does not parse"
  jq -e '.segments | type == "array"' "$tmp/snap.json" >/dev/null || fail "$name: snapshot does not parse"
  echo "ok: gpurt stats $name (summary, abbreviated, json, snapshot, prometheus)"
done

# (into files: grep -q closing a pipe early would fail the writer under pipefail)
"$GPURT" stats "$DATA/rmm_small.csv" --policy naive --format prometheus >"$tmp/naive.txt" &&
  grep -q 'allocator="naive"' "$tmp/naive.txt" || fail "stats --policy naive"
"$GPURT" stats --events 2000 >"$tmp/day.txt" && grep -q "^| Largest free block " "$tmp/day.txt" ||
  fail "stats (dayshift) lost its summary"
"$GPURT" stats --workload dayshift --events 2000 --format prometheus >"$tmp/day.prom" &&
  grep -q 'allocator="dayshift"' "$tmp/day.prom" || fail "stats --workload dayshift --format prometheus"
echo "ok: gpurt stats --policy, dayshift"

expect_usage_error() { # args...: exit status 2 and a message
  "$@" >/dev/null 2>"$tmp/err.txt"
  [ $? -eq 2 ] && [ -s "$tmp/err.txt" ] || fail "expected a usage error from: $*"
}
expect_usage_error "$GPURT" stats "$DATA/rmm_small.csv" --events 10
expect_usage_error "$GPURT" stats --policy naive
expect_usage_error "$GPURT" stats "$DATA/rmm_small.csv" --format xml
expect_usage_error "$GPURT" stats "$DATA/rmm_small.csv" "$DATA/native_small.trace"
expect_usage_error "$GPURT" replay "$DATA/rmm_small.csv" --rate 10
expect_usage_error "$GPURT" replay "$DATA/rmm_small.csv" --serve 127.0.0.1:0 --csv
"$GPURT" stats "$DATA/rmm_bad_size.csv" >/dev/null 2>&1 && fail "stats accepted a malformed trace"
echo "ok: usage errors"

# replay --serve: live /metrics mid-replay (7 events at 0.5/s: 14 s), then SIGINT stops it cleanly (exit 0).
if "$GPURT" serve-demo --help >/dev/null 2>&1; then
  "$GPURT" replay "$DATA/rmm_small.csv" --serve 127.0.0.1:0 --rate 0.5 --linger 60 >"$tmp/serve.out" 2>"$tmp/serve.log" &
  spid=$!
  port=""
  for _ in $(seq 1 100); do
    port=$(sed -n 's|.*serving metrics at http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/serve.log")
    [ -n "$port" ] && break
    sleep 0.1
  done
  [ -n "$port" ] || { kill "$spid"; fail "replay --serve did not start: $(cat "$tmp/serve.log")"; }
  command -v curl >/dev/null || { kill "$spid"; fail "curl is not installed (scripts/deps.sh installs it)"; }
  curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/live.txt" || { kill "$spid"; fail "curl /metrics failed"; }
  grep -q '^gpurt_alloc_largest_free_block_bytes{device="0",allocator="caching",pool="all"}' "$tmp/live.txt" ||
    { kill "$spid"; fail "live /metrics lacks largest_free_block"; }
  kill -INT "$spid"
  for _ in $(seq 1 100); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$spid" 2>/dev/null && { kill -9 "$spid"; fail "replay --serve ignored SIGINT"; }
  wait "$spid"
  rc=$?
  [ $rc -eq 0 ] || fail "replay --serve exited $rc after SIGINT: $(cat "$tmp/serve.log")"
  grep -q "interrupted after" "$tmp/serve.log" || fail "replay --serve did not say it was interrupted"
  grep -q "interrupted)" "$tmp/serve.out" || fail "no summary of the interrupted replay"
  echo "ok: replay --serve serves live /metrics and stops cleanly on SIGINT"
else
  "$GPURT" replay "$DATA/rmm_small.csv" --serve 127.0.0.1:0 >/dev/null 2>"$tmp/err.txt"
  [ $? -eq 2 ] && grep -q libmicrohttpd "$tmp/err.txt" || fail "replay --serve without the server: no clear error"
  echo "ok: replay --serve says it needs libmicrohttpd"
fi
