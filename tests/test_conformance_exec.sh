#!/usr/bin/env bash
# test_conformance_exec.sh — gpurt-conformance's sim column. Cases 10-15 ask
# the CUDA stream cases' questions of the executor, on both clocks, and must
# pass there. Every sim cell is deterministic (the threads clock adds no
# figures, the virtual clock's are exact), so each must be the cell
# docs/CONFORMANCE.md records: the table cannot drift from the program. The
# cuda column is not looked at (--sim-only: no driver is touched).
set -euo pipefail
GPURT=${1:?usage: test_conformance_exec.sh PATH/TO/gpurt}
conf=$(dirname "$GPURT")/gpurt-conformance
doc=$(dirname "${BASH_SOURCE[0]}")/../docs/CONFORMANCE.md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
[ -x "$conf" ] || fail "no gpurt-conformance beside $GPURT"
[ -f "$doc" ] || fail "no $doc"

# NUMBER<TAB>SIM-CELL of each table row of a conformance table
sim_cells() {
  awk -F' [|] ' '/^\| [0-9]+ \| / { n = $1; sub(/^\| /, "", n); print n "\t" $4 }' "$1"
}

"$conf" --sim-only >"$tmp/out.md" 2>"$tmp/err.txt" ||
  fail "gpurt-conformance --sim-only exited $?:"$'\n'"$(cat "$tmp/out.md" "$tmp/err.txt")"
grep -Eq '^[0-9]+ case\(s\), 0 failure\(s\); CUDA not available$' "$tmp/out.md" ||
  fail "summary line: $(tail -1 "$tmp/out.md")"
sim_cells "$tmp/out.md" >"$tmp/got.tsv"
sim_cells "$doc" >"$tmp/doc.tsv"

for n in 10 11 12 13 14 15; do
  cell=$(awk -F'\t' -v n="$n" '$1 == n { print $2 }' "$tmp/got.tsv")
  case "$cell" in
    "PASS: "*"; on the executor, both clocks; virtual times, asserted exactly: "*) ;;
    *) fail "case $n's sim cell is not an executor PASS: '$cell'" ;;
  esac
done

diff -u "$tmp/doc.tsv" "$tmp/got.tsv" >"$tmp/diff.txt" ||
  fail "docs/CONFORMANCE.md's sim column differs from gpurt-conformance's (- doc, + program):"$'\n'"$(cat "$tmp/diff.txt")"
echo "ok: $(wc -l <"$tmp/got.tsv") sim cells as documented, cases 10-15 pass on the executor"
