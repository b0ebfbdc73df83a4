#!/usr/bin/env bash
# test_plan_cli.sh — `gpurt plan`: a hand-made minimalloc CSV planned to its
# known optimum (text, --list, --json), a native trace, and the errors: a
# malformed file and bad options refused with their reasons and exit codes.
set -euo pipefail
GPURT=${1:?usage: test_plan_cli.sh PATH/TO/gpurt}
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# 0 and 1 never live together, 2 meets both: the optimum is the peak, 25 bytes
printf 'id,lower,upper,size\n0,0,2,10\n1,2,4,20\n2,1,3,5\n' >"$tmp/three.csv"
out=$("$GPURT" plan "$tmp/three.csv") || fail "plan: $out"
grep -q "buffers          3$" <<<"$out" || fail "buffers: $out"
grep -q "peak live        .*(25 B)" <<<"$out" || fail "peak: $out"
grep -q "heap needed      .*(25 B)" <<<"$out" || fail "heap: $out"
grep -q "heap / peak      1.0000 (optimal)" <<<"$out" || fail "ratio: $out"
grep -q "planner time" <<<"$out" || fail "time: $out"
out=$("$GPURT" plan "$tmp/three.csv" --list) || fail "--list: $out"
[ "$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+$' <<<"$out")" -eq 3 ] || fail "--list rows: $out"
json=$("$GPURT" plan "$tmp/three.csv" --json --list --budget-ms 5000) || fail "--json"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["heap"] == d["peak_live"] == 25 and d["buffers"] == 3 and d["valid"] and len(d["placements"]) == 3, d' "$json" ||
  fail "--json: $json"
printf 'gpurt-trace 1\nalloc 1 100\nalloc 2 50\nfree_completed 1 100\nalloc 3 100\nfree_completed 2 50\nfree_completed 3 100\n' >"$tmp/t.trace"
out=$("$GPURT" plan "$tmp/t.trace") || fail "native: $out"
grep -q "heap needed      .*(150 B)" <<<"$out" || fail "native heap: $out"
gzip -c "$tmp/three.csv" | "$GPURT" plan - >"$tmp/stdin.out" || fail "stdin: $(cat "$tmp/stdin.out")"
grep -q "(25 B)" "$tmp/stdin.out" || fail "stdin: $(cat "$tmp/stdin.out")"
echo "ok: minimalloc CSV to its optimum, --list, --json, native trace, gzip on stdin"
printf 'id,lower,upper,size\n0,3,3,5\n' >"$tmp/bad.csv"
set +e
err=$("$GPURT" plan "$tmp/bad.csv" 2>&1); rc=$?
set -e
[ "$rc" -eq 1 ] || fail "bad file: exit $rc"
grep -q "bad.csv:2: buffer 0: upper (3) must be greater than lower (3)" <<<"$err" || fail "bad file: $err"
set +e
err=$("$GPURT" plan "$tmp/three.csv" --budget-ms 0 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--budget-ms 0: exit $rc"
grep -q "option '--budget-ms' wants an integer" <<<"$err" || fail "--budget-ms: $err"
set +e
err=$("$GPURT" plan 2>&1); rc=$?
set -e
[ "$rc" -eq 2 ] || fail "no trace: exit $rc"
grep -q "usage: gpurt plan TRACE" <<<"$err" || fail "no trace: $err"
set +e
err=$("$GPURT" plan "$tmp/missing.csv" 2>&1); rc=$?
set -e
[ "$rc" -eq 1 ] || fail "missing file: exit $rc ($err)"
"$GPURT" --help | grep -q "^  plan " || fail "gpurt --help lacks plan"
"$GPURT" help plan | grep -q "usage: gpurt plan" || fail "gpurt help plan"
echo "ok: malformed file, bad option, missing argument and file refused; listed in --help"
