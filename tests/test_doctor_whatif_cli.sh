#!/usr/bin/env bash
# test_doctor_whatif_cli.sh — `gpurt whatif`: the table (recorded run first,
# then every setting), --json, --csv, --goal, --fail-on-oom's exit status 3,
# and the refusals.
set -uo pipefail
GPURT=${1:?usage: test_doctor_whatif_cli.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# six 9 MiB tensors, every other one freed, then a 12 MiB request that failed
{
  echo "gpurt-trace 1"
  for i in 0 1 2 3 4 5; do printf 'alloc %d 9437184 0 - 0x%x\n' $i $((0x10000000 + i * 0x900000)); done
  for i in 0 2 4; do printf 'free %d 9437184 0 - 0x%x\n' $i $((0x10000000 + i * 0x900000)); done
  echo "oom - 12582912 0 - 0"
} >"$tmp/frag.trace"

out=$("$GPURT" whatif "$tmp/frag.trace" --capacity 60M) || fail "whatif failed: $out"
grep -q "first fit on a 60.00 MiB paged device" <<<"$out" || fail "no device line: $out"
grep -qE "^  recorded run +1 " <<<"$out" || fail "no recorded row: $out"
grep -qE "^  \(as recorded\) +1 +0/1 " <<<"$out" || fail "no as-recorded row: $out"
grep -qE "^  expandable_segments:True " <<<"$out" || fail "no expandable row: $out"
echo "ok: table"

json=$("$GPURT" whatif "$tmp/frag.trace" --capacity 60M --json) || fail "--json failed"
grep -q '"capacity": 62914560, "device_model": "paged"' <<<"$json" || fail "--json header: $json"
grep -q '"conf": "", "ok": true, "ooms": 1, "recorded_ooms": 1, "recorded_ooms_avoided": 0' <<<"$json" ||
  fail "--json as-recorded row: $json"
csv=$("$GPURT" whatif "$tmp/frag.trace" --capacity 60M --csv --goal min-syncs) || fail "--csv failed"
head -1 <<<"$csv" | grep -q "^conf,ok,ooms," || fail "--csv header: $csv"
echo "ok: --json, --csv"

grep -qE "^  roundup_power2_divisions:4 +0 +1/1 " <<<"$out" || fail "divisions 4 should avoid the OOM: $out"
"$GPURT" whatif "$tmp/frag.trace" --capacity 40M --fail-on-oom >/dev/null
[ $? -eq 3 ] || fail "--fail-on-oom: 54 MiB live cannot fit in 40 MiB, exit should be 3"
"$GPURT" whatif "$tmp/frag.trace" --capacity 60M --fail-on-oom >/dev/null || fail "--fail-on-oom at 60 MiB"
echo "ok: --fail-on-oom"

err=$("$GPURT" whatif "$tmp/frag.trace" --goal fast 2>&1) && fail "--goal fast accepted"
grep -q "option '--goal' wants one of no-oom, min-reserved, min-syncs, got 'fast'" <<<"$err" || fail "--goal: $err"
err=$("$GPURT" whatif "$tmp/frag.trace" --json --csv 2>&1) && fail "--json --csv accepted"
grep -q -- "--json and --csv are two outputs" <<<"$err" || fail "--json --csv: $err"
err=$("$GPURT" whatif "$tmp/frag.trace" --capacity 1M 2>&1) && fail "--capacity 1M accepted"
grep -q "a paged device holds whole 2 MiB pages" <<<"$err" || fail "--capacity 1M: $err"
echo "ok: refusals"

# gpurt doctor on a fragmentation-bound OOM: two 20 MiB segments each with
# one 9 MiB block live among 11 MiB free, then 12 MiB asked with 2 MiB free
cat >"$tmp/pinned.trace" <<'TRACE'
gpurt-trace 1
segment_alloc - 20971520 0 - 0x10000000
alloc 0 9437184 0 - 0x10000000
alloc 1 9437184 0 - 0x10900000
segment_alloc - 20971520 0 - 0x11400000
alloc 2 9437184 0 - 0x11400000
alloc 3 9437184 0 - 0x11d00000
free 0 9437184 0 - 0x10000000
free 2 9437184 0 - 0x11400000
oom - 12582912 0 - 2097152
%segment 0x10000000 20971520 0 large 0
%block 0x10000000 9437184 0 inactive
%block 0x10900000 9437184 9437184 active_allocated
%block 0x11200000 2097152 0 inactive
%segment 0x11400000 20971520 0 large 0
%block 0x11400000 9437184 0 inactive
%block 0x11d00000 9437184 9437184 active_allocated
%block 0x12600000 2097152 0 inactive
TRACE
out=$("$GPURT" doctor "$tmp/pinned.trace") || fail "doctor failed: $out"
grep -q "^verdict: fragmentation-bound$" <<<"$out" || fail "doctor verdict: $out"
grep -q "fit in the 42.00 MiB the process had (40.00 MiB reserved + 2.00 MiB free)" <<<"$out" || fail "why: $out"
grep -qE "^  0x10000000 +20.00 MiB segment, +11.00 MiB free, 1 live block" <<<"$out" || fail "pinned: $out"
grep -q "capacity: the snapshot's first OOM" <<<"$out" || fail "capacity: $out"
grep -qE "^  (PYTORCH_CUDA_ALLOC_CONF=|keep the snapshot's settings)" <<<"$out" || fail "recommendation: $out"
grep -qE "^  broken  oom-retries +1 OOM recorded; no allocation succeeded on a retry" <<<"$out" ||
  fail "contract: the OOM: $out"
grep -qE "^  unknown steady-state-mallocs +no repeating loop found" <<<"$out" || fail "contract: no loop: $out"
grep -qE "^  kept    cross-stream-frees" <<<"$out" || fail "contract: cross-stream: $out"
json=$("$GPURT" doctor "$tmp/pinned.trace" --json) || fail "doctor --json failed"
grep -q '"verdict": "fragmentation-bound"' <<<"$json" || fail "doctor --json: $json"
grep -q '"rule": "oom-retries", "outcome": "broken", "count": 0, "also": 1' <<<"$json" || fail "doctor --json contract: $json"
grep -q '"steady_state": null' <<<"$json" || fail "doctor --json steady_state: $json"
"$GPURT" doctor "$tmp/pinned.trace" --fail-on-oom >/dev/null
[ $? -eq 3 ] || fail "doctor --fail-on-oom: the snapshot's settings OOM at 42 MiB, exit should be 3"
echo "ok: doctor"

# gpurt report: one self-contained page; doctor --html writes the same page
"$GPURT" report "$tmp/pinned.trace" >/dev/null 2>&1 && fail "report without -o accepted"
out=$("$GPURT" report "$tmp/pinned.trace" -o "$tmp/r.html") || fail "report failed: $out"
grep -q "^report: $tmp/r.html (9 events)$" <<<"$out" || fail "report: $out"
grep -q '<script id="gpurt-data" type="application/json">{"name":"pinned.trace"' "$tmp/r.html" || fail "report data"
grep -q '"verdict":"fragmentation-bound"' "$tmp/r.html" || fail "report verdict"
grep -q '"marks":{"peak":[0-9]*,"ooms":\[8\]' "$tmp/r.html" || fail "report marks: $(grep -o '"marks":[^}]*' "$tmp/r.html")"
! grep -Eq '(src|href)="https?:' "$tmp/r.html" || fail "report refers to the network"
json=$("$GPURT" doctor "$tmp/pinned.trace" --json --html "$tmp/d.html" 2>"$tmp/err.txt") || [ $? -eq 0 ] ||
  fail "doctor --html failed: $(cat "$tmp/err.txt")"
grep -q "^report: $tmp/d.html" "$tmp/err.txt" || fail "doctor --html: $(cat "$tmp/err.txt")"
grep -q '"verdict": "fragmentation-bound"' <<<"$json" || fail "doctor --json --html: stdout is not the JSON alone"
cmp -s "$tmp/r.html" "$tmp/d.html" || fail "doctor --html and report wrote different pages"
out=$("$GPURT" whatif "$tmp/pinned.trace" --html "$tmp/w.html") || fail "whatif --html failed: $out"
grep -qE "^report: $tmp/w.html \([0-9]+ settings\)$" <<<"$out" || fail "whatif --html: $out"
grep -q '<title>(as recorded)</title>' "$tmp/w.html" || fail "whatif --html: no line for the recorded settings"
grep -q 'id="toggle-p1"' "$tmp/w.html" || fail "whatif --html: no legend toggles"
json=$("$GPURT" whatif "$tmp/pinned.trace" --json --html "$tmp/w2.html" 2>/dev/null) || fail "whatif --json --html"
python3 -c 'import json,sys; json.loads(sys.argv[1])' "$json" || fail "whatif --json --html: stdout is not one JSON object"
echo "ok: report"
