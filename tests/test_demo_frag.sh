#!/usr/bin/env bash
# test_demo_frag.sh — `gpurt demo frag` prints the figures its three parts
# produce, exactly: every one is deterministic (simulated device, seeded
# traces). Demo 1: 32 blocks of 8 MB fill the 256 MB device, the 16 freed
# ones leave 128 MB free, as sixteen 8 MB holes when interleaved with the
# kept ones or as one 128 MB hole when grouped. Demo 2: 5000 cycles are 5000
# device mallocs and frees raw, one device malloc plus 4999 cache hits
# cached. The utilization table at its defaults: the per-family figures are
# recomputed from the allocator's own statistics by test_demo_frag_table.c;
# here the printed mean row must be the mean of the rows, no figure may pass
# 100%, and a policy's column must not depend on the other policies run.
set -euo pipefail
GPURT=${1:?usage: test_demo_frag.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
# has FILE LINE: FILE holds LINE, whole and exact
has() { grep -Fxq -- "$2" "$1" || fail "no line '$2' in $(basename "$1"):"$'\n'"$(cat "$1")"; }

"$GPURT" demo frag >"$tmp/out.txt"
out=$tmp/out.txt

# --- Demo 1 and Demo 2 ---
has "$out" "  interleaved (mixed)    free=128 MB  largest hole=  8 MB  16MB alloc: FAILS (fragmented!)"
has "$out" "  grouped (disciplined)  free=128 MB  largest hole=128 MB  16MB alloc: OK"
has "$out" "  raw driver :  5000 mallocs,  5000 frees (each free = device sync)"
has "$out" "  caching    :     1 device mallocs,  4999 bin hits, 0 device frees"
echo "ok: Demo 1 layouts, Demo 2 device calls"

# --- the utilization table at its defaults (5 seeds, 1024 MB) ---
has "$out" "  device 1024 MB, first fit; mean over 5 seeds of each trace family"
has "$out" "  trace family            naive    caching   what makes it adversarial"
rows=(
  "  phase-growth            83.2%      78.5%   each phase's buffers are 25% larger than the holes the last phase left"
  "  checkerboard            78.7%      78.5%   small long-lived tensors land in the holes 16-64 MB buffers leave"
  "  small-among-large       87.8%      85.1%   long-lived <1 MB tensors pinned between short-lived 2-24 MB ones"
  "  random-churn            85.7%      81.2%   log-uniform 32 KB-32 MB sizes, random lifetimes, slowly growing live set"
  "  size-drift              86.7%      82.1%   request sizes drift upward; 10% of each generation lives forever"
  "  step-batches            95.2%      85.6%   8 same-size activations per step freed together, one small output kept"
  "  mean                    86.2%      81.8%"
  "  device syncs/run         2360         24   (device frees before the first failure: each one stalls the GPU)"
)
for r in "${rows[@]}"; do has "$out" "$r"; done

# The rows between the header and "mean", as "name naive caching" (per cent).
table() {
  awk '/^  trace family/ {on = 1; next} on && /^  mean/ {exit} on && NF {
         v = ""; for (i = 2; i <= NF && $i ~ /%$/; i++) { sub(/%$/, "", $i); v = v " " $i }; print $1 v }' "$1"
}
table "$out" >"$tmp/rows.txt"
[ "$(wc -l <"$tmp/rows.txt")" -eq 6 ] || fail "not 6 family rows: $(cat "$tmp/rows.txt")"
# Each printed figure is rounded to 0.1, so the mean of the rounded rows is
# within 0.05 of the exact mean, which is within 0.05 of the printed mean.
mean_line=$(grep '^  mean ' "$out")
awk -v mean="$mean_line" '
  { for (p = 2; p <= NF; p++) { if ($p > 100 || $p < 0) bad = bad " " $1 ":" $p; s[p] += $p }; n++; cols = NF }
  END {
    split(mean, m, " ")
    for (p = 2; p <= cols; p++) {
      want = m[p]; sub(/%$/, "", want)
      if ((s[p] / n - want) > 0.1 + 1e-9 || (want - s[p] / n) > 0.1 + 1e-9) {
        printf "column %d: rows average %.3f, mean row says %s\n", p - 1, s[p] / n, want; exit 1
      }
    }
    if (bad != "") { print "utilization out of [0, 100]:" bad; exit 1 }
  }' "$tmp/rows.txt" || fail "the mean row is not the mean of the table"
echo "ok: utilization table at the defaults, its mean row"

# --- a policy's figures do not depend on the others in the run ---
"$GPURT" demo frag --policies caching,naive >"$tmp/swapped.txt"
table "$tmp/swapped.txt" | awk '{print $1, $3, $2}' >"$tmp/swapped_rows.txt"
cmp -s "$tmp/rows.txt" "$tmp/swapped_rows.txt" || fail "--policies caching,naive is not the table with its columns swapped"
"$GPURT" demo frag --policies naive >"$tmp/naive.txt"
table "$tmp/naive.txt" >"$tmp/naive_rows.txt"
awk '{print $1, $2}' "$tmp/rows.txt" | cmp -s - "$tmp/naive_rows.txt" || fail "--policies naive alone differs from its column"

# --- a smaller run: one seed, 256 MB ---
"$GPURT" demo frag --seeds 1 --capacity-mb 256 >"$tmp/small.txt"
has "$tmp/small.txt" "  device 256 MB, first fit; mean over 1 seeds of each trace family"
has "$tmp/small.txt" "  phase-growth            87.5%      52.0%   each phase's buffers are 25% larger than the holes the last phase left"
has "$tmp/small.txt" "  mean                    77.7%      66.9%"
has "$tmp/small.txt" "  device syncs/run          474          4   (device frees before the first failure: each one stalls the GPU)"
echo "ok: column independence, --seeds 1 --capacity-mb 256"
