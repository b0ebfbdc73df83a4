#!/usr/bin/env bash
# test_demo_emptycache.sh — `gpurt demo emptycache` prints exact device-call
# counts and reserved-memory figures (simulated device, seeded batch sizes),
# and they agree with the series it writes with --csv:
#   - mean MB and peak MB are the mean and the maximum of the policy's column,
#     and the chart's top is the largest peak;
#   - each strip-chart character is its sample on the 8-level scale to the top;
#   - PyTorch's policy returns every free segment, so after each empty_cache
#     only the 512 MB weights segment is left, and its device mallocs are one
#     for the weights plus each step's segments, which its peak tells apart:
#     24 activations of 4 MB (+4 KB steps) fill 6 segments of 20 MB, of 8 MB
#     12 segments, of 12 MB and 16 MB one rounded segment each (24); it frees
#     all but the weights.
set -euo pipefail
GPURT=${1:?usage: test_demo_emptycache.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
has() { grep -Fxq -- "$2" "$1" || fail "no line '$2' in $(basename "$1"):"$'\n'"$(cat "$1")"; }

"$GPURT" demo emptycache --csv "$tmp/series.csv" >"$tmp/out.txt"
out=$tmp/out.txt
has "$out" "  512 MB of weights, 24 activations per step for a batch of 8/16/24/32, 40 steps"
rows=(
  "PyTorch (idle 0)|625|624|645|942"
  "idle 1 cycles|279|254|838|1278"
  "idle 4 cycles|49|16|966|1112"
  "idle 16 cycles|25|0|948|956"
)
grep -Fq "reserved: each step's peak, then after empty_cache (top 1278 MB)" "$out" || fail "chart top is not 1278 MB"
[ "$(head -1 "$tmp/series.csv")" = "sample,idle0,idle1,idle4,idle16" ] || fail "CSV header"
[ "$(wc -l <"$tmp/series.csv")" -eq 81 ] || fail "CSV: not 80 samples"

col=2
for r in "${rows[@]}"; do
  IFS='|' read -r name mallocs frees mean peak <<<"$r"
  line=$(printf '  %-18s %11s %9s %8s %8s   |' "$name" "$mallocs" "$frees" "$mean" "$peak")
  got=$(grep -F -- "$line" "$out") || fail "no row '$line'"
  # the strip from the CSV column: round(sample / top * 8) on the 8 levels
  strip=$(awk -F, -v c=$col -v top=$((1278 << 20)) 'BEGIN {
            split(" |▁|▂|▃|▄|▅|▆|▇|█", lv, "|") }
          NR > 1 { l = int($c / top * 8 + 0.5); s = s lv[l + 1] } END { print s }' "$tmp/series.csv")
  [ "$got" = "$line$strip|" ] || fail "$name: strip chart is not the CSV series:"$'\n'"$got"$'\n'"$line$strip|"
  # mean and peak from the CSV column
  awk -F, -v c=$col -v mean="$mean" -v peak="$peak" '
    NR > 1 { s += $c; if ($c > m) m = $c; n++ }
    END { mib = 1048576
          if (sprintf("%.0f", s / n / mib) != mean) { printf "mean %.3f MB, printed %s\n", s / n / mib, mean; exit 1 }
          if (int(m / mib) != peak) { printf "max %d MB, printed peak %s\n", m / mib, peak; exit 1 } }' \
    "$tmp/series.csv" || fail "$name: mean/peak disagree with the CSV"
  col=$((col + 1))
done
echo "ok: the table's figures, its strips, mean and peak against the CSV"

# PyTorch's policy: back to the weights after every empty_cache; device
# mallocs = 1 + the segments each step's peak implies; frees = mallocs - 1.
awk -F, 'NR > 1 {
    mb = $2 / 1048576
    if ($1 % 2) { if (mb != 512) { printf "sample %d: %s MB after empty_cache, not 512\n", $1, mb; exit 1 }; next }
    segs = mb == 632 ? 6 : mb == 752 ? 12 : mb == 846 ? 24 : mb == 942 ? 24 : -1
    if (segs < 0) { printf "sample %d: peak %s MB is no batch size\n", $1, mb; exit 1 }
    total += segs }
  END { if (total + 1 != 625) { printf "segments %d + 1, printed 625\n", total; exit 1 } }' "$tmp/series.csv" ||
  fail "PyTorch policy's device mallocs do not follow from its series"
echo "ok: PyTorch policy: weights only after each empty_cache, 625 = 1 + each step's segments"
