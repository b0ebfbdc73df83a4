#!/usr/bin/env bash
# test_doctor_diff_cli.sh — `gpurt diff A B`: the recorded figures side by
# side, the sites whose bytes at the peak changed (matched by frames across
# the two traces, whose stack ids differ), the segments only one holds, and
# the refusals.
set -uo pipefail
GPURT=${1:?usage: test_doctor_diff_cli.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cat >"$tmp/before.trace" <<'TRACE'
gpurt-trace 1
%frame 1 12 "load" "serve.py"
%frame 2 40 "step" "train.py"
%stack 1 1
%stack 2 2
segment_alloc - 2097152 0 - 0x10000000
alloc 0 1000 0 - 0x10000000 @1
alloc 1 1000 0 - 0x10000400 @2
%segment 0x10000000 2097152 0 small 0
%block 0x10000000 1024 1000 active_allocated @1
%block 0x10000400 1024 1000 active_allocated @2
%block 0x10000800 2095104 0 inactive
TRACE
# after: the step allocates 3000 bytes more, in a second segment; the stacks are numbered the other way
cat >"$tmp/after.trace" <<'TRACE'
gpurt-trace 1
%frame 1 40 "step" "train.py"
%frame 2 12 "load" "serve.py"
%stack 1 1
%stack 2 2
segment_alloc - 2097152 0 - 0x10000000
alloc 0 1000 0 - 0x10000000 @2
alloc 1 4000 0 - 0x10000400 @1
segment_alloc - 2097152 0 - 0x20000000
alloc 2 100 0 - 0x20000000 @1
%segment 0x10000000 2097152 0 small 0
%block 0x10000000 1024 1000 active_allocated @2
%block 0x10000400 4096 4000 active_allocated @1
%block 0x10001400 2091008 0 inactive
%segment 0x20000000 2097152 0 small 0
%block 0x20000000 512 100 active_allocated @1
%block 0x20000200 2096640 0 inactive
TRACE
out=$("$GPURT" diff "$tmp/before.trace" "$tmp/after.trace") || fail "diff failed: $out"
grep -qE "^  reserved at the peak +2.00 MiB +4.00 MiB$" <<<"$out" || fail "reserved row: $out"
grep -qE "^  requested at the end +1.95 KiB +4.98 KiB$" <<<"$out" || fail "requested row: $out"
grep -qF "1000 B ->   4.00 KiB  (+3.03 KiB)  step (train.py:40)" <<<"$out" || fail "step site: $out"
grep -qF "load (serve.py:12)" <<<"$out" && fail "the load site did not change: $out"
grep -qF "only in after.trace: 0x20000000 2.00 MiB small" <<<"$out" || fail "segments: $out"
echo "ok: diff"
err=$("$GPURT" diff "$tmp/before.trace" 2>&1) && fail "one snapshot accepted"
err=$("$GPURT" diff "$tmp/before.trace" "$tmp/after.trace" "$tmp/after.trace" 2>&1) && fail "three accepted"
grep -q "two snapshots: before and after" <<<"$err" || fail "three: $err"
echo "ok: refusals"
