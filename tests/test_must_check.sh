#!/usr/bin/env bash
# test_must_check.sh — a caller that drops a grt_status does not compile
# cleanly: with -Werror, a file ignoring grt_alloc_free's result fails to
# build with the C compiler (GCC through GRT_MUST_CHECK on the declaration,
# clang through the type as well), a static function returning grt_status
# warns under clang, and the same files with the results checked build.
set -uo pipefail
include=$(dirname "$0")/../include
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
compilers=()
for cc in cc gcc clang; do command -v "$cc" >/dev/null && compilers+=("$cc"); done
[ ${#compilers[@]} -gt 0 ] || { echo "SKIPPED: no C compiler"; exit 77; }

cat >"$tmp/dropped.c" <<'C'
#include "gpurt/alloc.h"
void drop(grt_allocator *a, grt_devptr p);
void drop(grt_allocator *a, grt_devptr p) { grt_alloc_free(a, p); }
C
cat >"$tmp/checked.c" <<'C'
#include "gpurt/alloc.h"
int keep(grt_allocator *a, grt_devptr p);
int keep(grt_allocator *a, grt_devptr p) { return grt_alloc_free(a, p) != GRT_OK; }
C
cat >"$tmp/static.c" <<'C'
#include "gpurt/base.h"
static grt_status step(int x) { return x ? GRT_ERR_INVALID_ARG : GRT_OK; }
void run(int x);
void run(int x) { step(x); }
C
for cc in "${compilers[@]}"; do
  flags=(-std=c11 -Wall -Werror -I"$include" -c)
  "$cc" "${flags[@]}" "$tmp/checked.c" -o "$tmp/checked.o" 2>"$tmp/err" || fail "$cc: checked call refused: $(cat "$tmp/err")"
  if "$cc" "${flags[@]}" "$tmp/dropped.c" -o "$tmp/dropped.o" 2>"$tmp/err"; then
    fail "$cc: a dropped grt_alloc_free result compiled without a warning"
  fi
  grep -q "unused.result\|warn_unused_result" "$tmp/err" || fail "$cc: refused for another reason: $(cat "$tmp/err")"
  if "$cc" --version | grep -qi clang; then
    if "$cc" "${flags[@]}" "$tmp/static.c" -o "$tmp/static.o" 2>"$tmp/err"; then
      fail "$cc: a dropped status of a static function compiled without a warning"
    fi
    grep -q "unused.result\|warn_unused_result" "$tmp/err" || fail "$cc: static case refused for another reason: $(cat "$tmp/err")"
  fi
  echo "ok: $cc refuses a dropped grt_status"
done
