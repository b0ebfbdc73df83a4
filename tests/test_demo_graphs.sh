#!/usr/bin/env bash
# test_demo_graphs.sh — `gpurt demo graphs`: the figures that do not depend on
# the wall clock, exactly: how many of the seeded steps fell in each batch
# bucket, each bucket's graph pool (its activation buffer, bucket x 256
# floats = bucket KiB), and the padding line. They must add up: the steps
# per bucket sum to the steps run, the padded tokens are the sum of steps x
# bucket, the "all" pool is every bucket's (1+2+...+64 = 127 KiB, captured
# whether or not a step used it), and the padding percentage is
# (padded - real) / real. The eager and graph microseconds are wall time on
# the threads clock (not asserted).
set -euo pipefail
GPURT=${1:?usage: test_demo_graphs.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
has() { grep -Fxq -- "$2" "$1" || fail "no line '$2' in $(basename "$1"):"$'\n'"$(cat "$1")"; }

# check OUT STEPS "bucket:steps ..." PADDED REAL PCT
check() {
  local out=$1 steps=$2 want=$3 padded=$4 real=$5 pct=$6
  has "$out" "decode step: 24 layers x 6 kernels = 144 kernels; $steps steps, batch 1..64 padded to its bucket"
  # bucket steps pool-KiB of each row, "all" last
  awk '/^  bucket/ {on = 1; next} on && NF == 0 {exit} on {print $1, $2, $(NF - 1)}' "$out" >"$tmp/rows.txt"
  local got
  got=$(awk '$1 != "all" {printf "%s%s:%s", sep, $1, $2; sep = " "}' "$tmp/rows.txt")
  [ "$got" = "$want" ] || fail "steps per bucket: got '$got', want '$want'"
  awk -v steps="$steps" -v padded="$padded" '
    $1 == "all" { all_steps = $2; all_pool = $3; next }
    { if ($3 != $1) { printf "bucket %s: pool %s KiB, want %s\n", $1, $3, $1; exit 1 }
      n += $2; p += $1 * $2 }
    END { if (n != steps || all_steps != steps) { printf "steps %d / %d, want %d\n", n, all_steps, steps; exit 1 }
          if (p != padded) { printf "padded tokens %d, printed %d\n", p, padded; exit 1 }
          if (all_pool != 127) { printf "all pools %s KiB, want 127\n", all_pool; exit 1 } }' "$tmp/rows.txt" ||
    fail "the bucket rows do not add up"
  local line
  line=$(awk -v p="$padded" -v r="$real" 'BEGIN {
           printf "  padding: %.1f%% more tokens computed than requested (%d padded / %d real)", 100 * (p - r) / r, p, r }')
  has "$out" "$line"
  has "$out" "  padding: $pct% more tokens computed than requested ($padded padded / $real real)"
  has "$out" "  graph ~2.5 us + ~1 ns/node = ~2.6 us. Graph pools: one per bucket, 127 KiB here."
}

"$GPURT" demo graphs >"$tmp/default.txt"
check "$tmp/default.txt" 300 "1:4 2:3 4:13 8:27 16:35 32:69 64:149" 12582 9590 31.2
echo "ok: default run (300 steps, seed 7)"
"$GPURT" demo graphs --steps 10 >"$tmp/ten.txt"
check "$tmp/ten.txt" 10 "4:1 8:1 16:1 32:2 64:5" 412 347 18.7
"$GPURT" demo graphs --steps 20 --seed 3 >"$tmp/seed3.txt"
"$GPURT" demo graphs --steps 20 --seed 3 >"$tmp/seed3b.txt"
diff <(awk '/^ +[0-9]+ +[0-9]+ / {print $1, $2, $(NF - 1)}' "$tmp/seed3.txt") \
  <(awk '/^ +[0-9]+ +[0-9]+ / {print $1, $2, $(NF - 1)}' "$tmp/seed3b.txt") >/dev/null ||
  fail "--seed 3 twice: different buckets"
cmp -s <(grep padding: "$tmp/seed3.txt") <(grep padding: "$tmp/default.txt") && fail "--seed changed nothing"
echo "ok: --steps 10, --seed repeatable"
