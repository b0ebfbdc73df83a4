#!/usr/bin/env bash
# test_timeline_schema.sh — every timeline gpurt writes follows the Trace
# Event Format: the streams demos' (each scenario under both clocks, the
# deadlock's included, which must show its cycle) and `replay --timeline`'s
# (a hand-made trace, a GPU recording), checked with ajv against
# tests/browser/trace-event.schema.json; and two broken files the schema
# must refuse (a metadata event without cat, a zero-length slice), so the
# check can fail. Skips (77) when node or ajv (scripts/test.sh: npm ci in
# tests/browser) is absent.
#   test_timeline_schema.sh GPURT_BIN
set -uo pipefail
gpurt=${1:?usage: test_timeline_schema.sh path/to/gpurt}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "test_timeline_schema: skipped: $*" >&2; exit 77; }
command -v node >/dev/null || skip "node not installed"
[ -d "$here/browser/node_modules/ajv" ] || skip "ajv not installed (scripts/test.sh runs npm ci in tests/browser)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$gpurt" demo streams --out "$work/demo" >/dev/null || fail "gpurt demo streams"
"$gpurt" replay "$here/data/rmm_small.csv" --timeline "$work/rmm.json" >/dev/null || fail "replay --timeline (rmm)"
"$gpurt" replay "$here/data/gpu/gpurt_transformer_snapshot.pickle" --timeline "$work/gpu.json" >/dev/null ||
  fail "replay --timeline (gpu snapshot)"
files=("$work"/demo/*.json "$work/rmm.json" "$work/gpu.json")
[ ${#files[@]} -ge 10 ] || fail "expected 8 demo timelines and 2 replays, found ${#files[@]} files"
node "$here/browser/validate-trace.mjs" "${files[@]}" || fail "a timeline breaks the Trace Event Format"
# the deadlock's timeline has no op that ran, but shows the cycle
for f in "$work"/demo/s4_deadlock_*.json; do
  grep -q '"cat":"deadlock","ph":"i"' "$f" || fail "$(basename "$f"): no deadlock instant"
  grep -q '"cycle":"deadlock: a cycle of 2 waits' "$f" || fail "$(basename "$f"): the cycle is not named"
done
grep -q '"name":"cudaMalloc","cat":"segment","ph":"i","s":"p"' "$work/gpu.json" || fail "gpu.json: no segment instants"
grep -q '"ts":"recorded time_us from the first event"' "$work/gpu.json" || fail "gpu.json: not on the recorded clock"
# the schema refuses what the format forbids
printf '{"traceEvents":[{"name":"process_name","ph":"M","pid":1,"ts":0,"args":{"name":"x"}}]}' >"$work/bad1.json"
printf '{"traceEvents":[{"name":"record","cat":"x","ph":"X","pid":1,"tid":1,"ts":5,"dur":0}]}' >"$work/bad2.json"
for b in bad1 bad2; do
  node "$here/browser/validate-trace.mjs" "$work/$b.json" >/dev/null 2>&1 && fail "the schema accepted $b.json"
done
echo "test_timeline_schema: ok (${#files[@]} timelines valid, 2 broken ones refused)"
