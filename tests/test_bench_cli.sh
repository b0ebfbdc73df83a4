#!/usr/bin/env bash
# test_bench_cli.sh — `gpurt bench` on tiny inputs: W3 over the small
# minimalloc trace kept in tests/data (a row per allocator, every ratio >= 1, the
# JSON fields), W3's skip when the directory holds no trace, a short W1 with a
# row per allocator, and the option checks. Speed is not asserted.
set -uo pipefail
GPURT=${1:?usage: test_bench_cli.sh PATH/TO/gpurt}
DATA=$(dirname "$0")/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
policies="naive caching sharded bestfit bump buddy slab async"

mkdir -p "$tmp/traces" "$tmp/empty"
cp "$DATA/minimalloc_small.csv" "$tmp/traces/"
"$GPURT" bench --only w3 --traces "$tmp/traces" >"$tmp/w3.txt" || fail "bench --only w3"
for p in bins otree approx $policies; do
  line=$(grep -E "^  W3 +$p +heap needed / peak live" "$tmp/w3.txt") || fail "W3: no row for $p"
  ratio=$(echo "$line" | sed -E 's/.*peak live +([0-9.]+).*/\1/')
  awk -v r="$ratio" 'BEGIN { exit !(r >= 1.0) }' || fail "W3 $p: heap needed / peak live $ratio < 1"
  echo "$line" | grep -q "over 1 trace)" || fail "W3 $p: not over the one trace"
done
grep -q "reference (docs/ALLOCATORS.md" "$tmp/w3.txt" || fail "W3: no reference line"
echo "ok: W3 rows for the index, the peer design and every policy"

"$GPURT" bench --only w3 --traces "$tmp/traces" --json >"$tmp/w3.json" || fail "bench --only w3 --json"
[ "$(grep -c '"workload":"W3"' "$tmp/w3.json")" -eq 11 ] || fail "W3 json: not one line per allocator"
grep -q '"allocator":"bestfit","heap_needed_ratio":[1-9]' "$tmp/w3.json" || fail "W3 json: bestfit's ratio"
command -v jq >/dev/null || fail "jq is not installed (scripts/deps.sh installs it)"
jq -e -s 'all(.[]; .heap_needed_ratio >= 1)' "$tmp/w3.json" >/dev/null || fail "W3 json does not parse"
echo "ok: W3 json"

"$GPURT" bench --only w3 --traces "$tmp/empty" >"$tmp/skip.txt" || fail "W3 without traces failed"
grep -q "W3     skipped: no minimalloc CSV in $tmp/empty" "$tmp/skip.txt" || fail "W3: no skip message"
echo "ok: W3 skipped without traces"

"$GPURT" bench --only w1 --runs 1 --iterations 2000 >"$tmp/w1.txt" || fail "bench --only w1"
for a in bins otree approx harness $policies; do
  grep -qE "^  W1 +$a +[0-9.]+ ns/pair" "$tmp/w1.txt" || fail "W1: no row for $a"
done
echo "ok: W1 rows for every allocator"

"$GPURT" bench --bogus >/dev/null 2>&1
[ $? -eq 2 ] || fail "an unknown option is not exit status 2"
"$GPURT" bench --help | grep -q "usage: gpurt bench" || fail "--help"
"$GPURT" bench --only nosuch >/dev/null 2>&1
[ $? -eq 2 ] || fail "bench --only nosuch is not exit status 2"
# the benchmark executables beside the CLI answer --help without running
BENCH_EXEC=$(dirname "$GPURT")/../bench/bench_exec
if [ -x "$BENCH_EXEC" ]; then
  out=$(timeout 10 "$BENCH_EXEC" --help 2>&1) || fail "bench_exec --help: exit $?"
  grep -q "usage: bench_exec" <<<"$out" || fail "bench_exec --help ran: $out"
  timeout 10 "$BENCH_EXEC" 12abc >/dev/null 2>&1
  [ $? -eq 2 ] || fail "bench_exec 12abc is not exit status 2"
fi
echo "ok: options"
