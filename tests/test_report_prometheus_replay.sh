#!/usr/bin/env bash
# test_report_prometheus_replay.sh — a real Prometheus scrapes `gpurt replay
# TRACE --serve` while it paces a real PyTorch trace (../shared).
#
# 1. `gpurt stats TRACE --format prometheus` passes `promtool check metrics`.
# 2. `gpurt replay TRACE --csv` gives the states the replay passes through
#    (reserved and largest free block after every event).
# 3. `gpurt replay TRACE --serve` paces the same trace on a random loopback
#    port; Prometheus (temporary config and data folder, 1 s scrapes) scrapes
#    it; curl sees live figures mid-run.
# 4. Prometheus's HTTP API shows the largest_free_block series moving through
#    the replay's own states only (each sample is a state of step 2), ending at
#    the replay's final value; reserved likewise.
# Bounded (~20 s, deadline 55 s); both servers are stopped on any exit.
# Exit 77 (skip) with a message without ../shared, prometheus/promtool/curl/jq,
# or a gpurt built without libmicrohttpd.
set -uo pipefail
GPURT=${1:?usage: test_report_prometheus_replay.sh PATH/TO/gpurt}
SHARED=${GRT_SHARED_DIR:-$(dirname "$0")/../../shared}
TRACE=$SHARED/traces/pytorch/MercuryB1_empty_cache_loop.pickle
RATE=1000
if [ ! -r "$TRACE" ]; then
  echo "SKIPPED: $TRACE not found (set GRT_SHARED_DIR to the shared data folder)"
  exit 77
fi
source "$(dirname "$0")/prometheus_lib.sh"
prom_require_tools

# 1. The exposition text at the end of the trace, checked by Prometheus's linter.
"$GPURT" stats "$TRACE" --format prometheus >"$tmp/metrics.txt" || fail "gpurt stats TRACE failed"
promtool check metrics <"$tmp/metrics.txt" || fail "promtool check metrics found problems"
echo "ok: promtool check metrics (gpurt stats $(basename "$TRACE") --format prometheus)"

# 2. Every state the replay passes through (0 = before the first event).
"$GPURT" replay "$TRACE" --csv --no-search >"$tmp/series.csv" || fail "gpurt replay --csv failed"
states() { # CSV column -> JSON array of its distinct values, plus 0
  awk -F, -v c="$1" 'NR > 1 { print $c } END { print 0 }' "$tmp/series.csv" | sort -un | jq -sc .
}
lfb_states=$(states 7)
reserved_states=$(states 2)
lfb_final=$(tail -n 1 "$tmp/series.csv" | cut -d, -f7)
reserved_final=$(tail -n 1 "$tmp/series.csv" | cut -d, -f2)
echo "ok: the replay passes through $(jq length <<<"$lfb_states") largest-free-block states, ends at $lfb_final"

# 3a. gpurt replays on a random free port; 3b. Prometheus scrapes it every second.
prom_start_gpurt "$tmp/gpurt.out" replay "$TRACE" --rate "$RATE" --wait-scrape 20 --linger 40
prom_start_prometheus
start=$(date +%s)
echo "ok: gpurt replay on 127.0.0.1:$gport, prometheus on 127.0.0.1:$pport"

# 3c. Live figures mid-replay (a tenth of it done), as a user would curl them.
until grep -q " events " "$tmp/gpurt.log"; do
  [ $SECONDS -lt $deadline ] || fail "the replay did not start (no scrape?)"
  kill -0 "$gpid" 2>/dev/null || fail "gpurt exited early"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$gport/metrics" >"$tmp/live.txt" || fail "curl /metrics failed"
live_lfb=$(sed -n 's/^gpurt_alloc_largest_free_block_bytes{device="0",allocator="caching",pool="all"} //p' \
  "$tmp/live.txt")
[ -n "$live_lfb" ] || fail "live /metrics lacks the largest free block"
jq -e --argjson s "$lfb_states" --argjson v "$live_lfb" 'any($s[]; . == $v)' >/dev/null ||
  fail "live largest free block $live_lfb is no state of the replay"
grep -q '^gpurt_device_capacity_bytes{device="0"} [1-9]' "$tmp/live.txt" || fail "live /metrics lacks the device"
echo "ok: live largest free block mid-replay: $live_lfb bytes"

until grep -q "replay done" "$tmp/gpurt.log"; do
  [ $SECONDS -lt $deadline ] || fail "the replay did not finish in time"
  kill -0 "$gpid" 2>/dev/null || fail "gpurt exited early"
  sleep 0.2
done
grep -q "peak reserved" "$tmp/gpurt.out" || fail "no replay summary on stdout"
sleep 3 # let Prometheus scrape the final state

# 4. Ask Prometheus what it saw.
series() {
  curl -sfG "http://127.0.0.1:$pport/api/v1/query_range" --data-urlencode "query=$1" \
    --data-urlencode "start=$start" --data-urlencode "end=$(date +%s)" --data-urlencode "step=1" |
    jq -c '[.data.result[0].values[] | .[1] | tonumber]'
}
lfb=$(series 'gpurt_alloc_largest_free_block_bytes{allocator="caching",pool="all"}') || fail "query_range failed"
echo "largest_free_block samples (bytes): $lfb"
n=$(jq 'length' <<<"$lfb")
[ "$n" -ge 5 ] || fail "expected at least 5 samples of largest_free_block, got $n"
jq -e '(unique | length) >= 3' <<<"$lfb" >/dev/null || fail "largest_free_block did not move"
jq -e --argjson s "$lfb_states" 'all(.[]; . as $v | any($s[]; . == $v))' <<<"$lfb" >/dev/null ||
  fail "a largest_free_block sample is no state of the replay (expected one of $lfb_states)"
jq -e --argjson f "$lfb_final" '.[-1] == $f' <<<"$lfb" >/dev/null ||
  fail "largest_free_block did not end at the replay's final $lfb_final"
reserved=$(series 'gpurt_alloc_reserved_bytes{allocator="caching",pool="all"}') || fail "query_range failed"
jq -e --argjson s "$reserved_states" --argjson f "$reserved_final" \
  'all(.[]; . as $v | any($s[]; . == $v)) and .[-1] == $f and (unique | length) >= 2' <<<"$reserved" >/dev/null ||
  fail "reserved did not follow the replay: $reserved"
echo "ok: Prometheus saw largest_free_block take $(jq -c unique <<<"$lfb" | jq length) of the replay's states," \
  "ending at $lfb_final; reserved ended at $reserved_final"
