#!/usr/bin/env bash
# test_demo_staging.sh — `gpurt demo staging`: the virtual clock's figures
# exactly, recomputed here. 12 chunks of 256 KiB; H2D, kernel and D2H take
# T = 2.048 ms each (256 KiB at 0.128 GB/s; the kernel is set to the copy
# time). With K slots, chunk i starts when the H2D engine is free and when
# chunk i-K's D2H has given its slot back:
#   start(i) = max(start(i-1) + T, start(i-K) + 3T),  elapsed = start(11) + 3T
# so K=1 is the serial bound 36T, K=2 19T, K=3 the overlap bound (12+2)T.
# The pinned pool: two buffers per slot, 1+2+3 slots over the three runs,
# all in one 2 MiB small-pool segment: one host allocation (2 ms modelled),
# the other calls cache hits. The stream-ordered pool's counters come from
# a seeded virtual-clock run; they must add up: every malloc_async is a
# reuse of some kind or a block from the allocator, which the pool hands
# back by the end; the pool inserts a wait only for an INTERNAL_DEPS reuse; one host
# sync per 250 iterations plus the final one. The threads column is
# measured (not asserted); its output check is.
set -euo pipefail
GPURT=${1:?usage: test_demo_staging.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
has() { grep -Fxq -- "$2" "$1" || fail "no line '$2' in $(basename "$1"):"$'\n'"$(cat "$1")"; }

"$GPURT" demo staging >"$tmp/out.txt" || fail "demo staging failed: $(cat "$tmp/out.txt")"
out=$tmp/out.txt
has "$out" "gpurt demo staging — 12 chunks of 256 KiB; H2D, compute and D2H ~2 ms each"

# elapsed(K) in ns from the recurrence above
elapsed() {
  awk -v K=$1 'BEGIN { T = 2048000; for (i = 0; i < 12; i++) {
      s[i] = i ? s[i - 1] + T : 0; if (i >= K && s[i - K] + 3 * T > s[i]) s[i] = s[i - K] + 3 * T }
    print s[11] + 3 * T }'
}
serial=$((36 * 2048000))
overlap=$((14 * 2048000))
[ "$(elapsed 1)" -eq $serial ] && [ "$(elapsed 3)" -eq $overlap ] || fail "recurrence vs bounds"
for k in 1 2 3; do
  want=$(awk -v e="$(elapsed $k)" -v s=$serial -v o=$overlap -v k=$k 'BEGIN {
           printf "  %-3d %12.2f ", k, e / 1e6; printf "%12s", "" ; printf " %14.2f %14.2f %8s", s / 1e6, o / 1e6, "ok" }')
  # the threads column (measured) replaced by blanks
  got=$(grep -E "^  $k +[0-9]" "$out" | awk '{ $0 = substr($0, 1, 19) sprintf("%12s", "") substr($0, 32); print }')
  [ "$got" = "$want" ] || fail "K=$k row:"$'\n'"$(grep -E "^  $k +[0-9]" "$out")"$'\n'"want (threads blanked):"$'\n'"$want"
done
has "$out" "$(printf '  %-3s %12s %12s %14s %14s %8s' K "virtual ms" "threads ms" "serial bound" "overlap bound" output)"
grep -E '^  [123] ' "$out" | grep -Eq '^  1 +73\.73 +[0-9]+\.[0-9]{2} +73\.73 +28\.67 +ok$' || fail "K=1 row"
grep -E '^  [123] ' "$out" | grep -Eq '^  2 +38\.91 +[0-9]+\.[0-9]{2} +73\.73 +28\.67 +ok$' || fail "K=2 row"
grep -E '^  [123] ' "$out" | grep -Eq '^  3 +28\.67 +[0-9]+\.[0-9]{2} +73\.73 +28\.67 +ok$' || fail "K=3 row"
has "$out" "  pinned pool: 12 calls, 1 host allocations (2.0 ms of modelled cudaHostAlloc), 11 cache hits"
echo "ok: staging rows (K=1..3), pinned pool"

rows=(
  "reuse on the freeing stream|1253|1457"
  "reuse behind an event edge|469|0"
  "reuse, device already passed|0|0"
  "reuse on OOM (internal dep)|0|0"
  "edges inserted|0|0"
  "host syncs|9|9"
  "reuses deferred|209|476"
  "blocks handed back to allocator|278|543"
  "device mallocs|50|116"
  "sanitizer reports|0|0"
)
declare -A shared per
for r in "${rows[@]}"; do
  IFS='|' read -r label a b <<<"$r"
  has "$out" "$(printf '  %-34s %12s %12s' "$label" "$a" "$b")"
  shared[$label]=$a
  per[$label]=$b
done
has "$out" "  reserved high                           50.0 MiB     156.0 MiB"
has "$out" "  used high                                4.4 MiB       4.0 MiB"
for pool in shared per; do
  declare -n k=$pool
  reuses=$((k["reuse on the freeing stream"] + k["reuse behind an event edge"] + k["reuse, device already passed"] +
    k["reuse on OOM (internal dep)"]))
  [ $((reuses + k["blocks handed back to allocator"])) -eq 2000 ] ||
    fail "$pool: $reuses reuses + ${k["blocks handed back to allocator"]} blocks handed back != 2000 mallocs"
  [ "${k["edges inserted"]}" -eq "${k["reuse on OOM (internal dep)"]}" ] || fail "$pool: edges != internal-dep reuses"
  [ "${k["host syncs"]}" -eq $((2000 / 250 + 1)) ] || fail "$pool: host syncs"
  unset -n k
done
echo "ok: stream-ordered pool counters, and they add up"
