#!/usr/bin/env bash
# test_library_symbols.sh — libgpurt.so exports what an API user calls and
# nothing else: every exported symbol is public (grt_ prefix, never the
# internal grt__), none belongs to the benchmark workloads, the demo
# scenarios or the dayshift day (static libraries of their own, never
# installed), and every exported function is declared in include/gpurt/.
set -uo pipefail
GPURT=${1:?usage: test_library_symbols.sh PATH/TO/gpurt}
lib=$(dirname "$GPURT")/../libgpurt.so
include=$(dirname "$0")/../include/gpurt
command -v nm >/dev/null || { echo "SKIPPED: nm (binutils) not installed"; exit 77; }
[ -e "$lib" ] || { echo "FAIL: $lib not found"; exit 1; }
fail() { echo "FAIL: $*"; exit 1; }
all=$(nm -D --defined-only "$lib" | awk '$2 ~ /[TDBRVW]/ {print $3}' | sort -u)
syms=$(echo "$all" | grep -v '^_' || true)
[ -n "$syms" ] || fail "no exported symbols in $lib"
# A coverage build links gcov's runtime into the library, with a few
# unprefixed helpers of its own (mangle_path): only grt_ symbols are judged there.
if echo "$all" | grep -q '^__gcov_'; then
  syms=$(echo "$syms" | grep '^grt_')
else
  bad=$(echo "$syms" | grep -v '^grt_' || true)
  [ -z "$bad" ] || fail "exported symbols without the grt_ prefix: $bad"
fi
bad=$(echo "$syms" | grep '^grt__' || true)
[ -z "$bad" ] || fail "internal grt__ symbols exported: $bad"
bad=$(echo "$syms" | grep -Ei 'workload|scenario|bench|dayshift|approx|churn|lifetime|pipe_' || true)
[ -z "$bad" ] || fail "benchmark or demo symbols in the installed library: $bad"
undeclared=""
for s in $syms; do
  grep -qw "$s" "$include"/*.h || undeclared="$undeclared $s"
done
[ -z "$undeclared" ] || fail "exported but declared in no public header:$undeclared"
echo "ok: $(echo "$syms" | wc -l) exported symbols, all public and declared"
