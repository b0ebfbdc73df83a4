#!/usr/bin/env bash
# test_cli_limits.sh — values beyond what the machine can do are refused up
# front with a message saying what they would need: a demo frag device whose
# traces cannot fit in host memory (and, in a plain build, under an
# address-space limit), and a stats day too short to be one.
set -uo pipefail
GPURT=${1:?usage: test_cli_limits.sh PATH/TO/gpurt}
fail() { echo "FAIL: $*"; exit 1; }

err=$("$GPURT" demo frag --capacity-mb 999999999999 2>&1 >/dev/null); rc=$?
[ $rc -eq 2 ] || fail "demo frag --capacity-mb 999999999999 exited $rc"
grep -q "needs about 3814697.3 GiB of host memory" <<<"$err" || fail "no clear refusal: $err"
echo "ok: demo frag refuses a device whose traces cannot fit in host memory"
if grep -qE '^GRT_SANITIZE:STRING=.+' "$(dirname "$GPURT")/../CMakeCache.txt" 2>/dev/null; then
  echo "note: the ulimit -v case is not run in a sanitizer build"
else
  err=$( (ulimit -v 400000; "$GPURT" demo frag --capacity-mb 200000) 2>&1 >/dev/null); rc=$?
  [ $rc -eq 2 ] && grep -q "needs about 0.8 GiB of host memory.*this process may use 0.4 GiB" <<<"$err" ||
    fail "demo frag under a 400 MB address-space limit: exit $rc: $err"
  echo "ok: demo frag measures the room against the address-space limit"
fi
err=$("$GPURT" stats --events 99 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "wants an integer >= 100" <<<"$err" || fail "stats --events 99: exit $rc: $err"
echo "ok: stats refuses a day of fewer than 100 events"
