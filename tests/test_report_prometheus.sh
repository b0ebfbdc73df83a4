#!/usr/bin/env bash
# test_report_prometheus.sh — a real Prometheus scrapes gpurt's /metrics.
#
# 1. `promtool check metrics` finds no problem with the exposition text.
# 2. `gpurt serve-demo` paces the dayshift serving day on a random loopback
#    port; Debian's Prometheus server (temporary config and data folder,
#    1 s scrapes) scrapes it; curl sees live figures mid-run.
# 3. Prometheus's HTTP API shows the day's story: largest_free_block sank,
#    reserved stayed flat, one OOM at the end.
# Everything is bounded in time and both servers are stopped on any exit.
# Exit 77 (skip) with a message when prometheus/promtool/curl/jq are missing.
set -euo pipefail
GPURT=${1:?usage: test_report_prometheus.sh PATH/TO/gpurt}
source "$(dirname "$0")/prometheus_lib.sh"
prom_require_tools

# 1. The exposition format, checked by Prometheus's own linter.
"$GPURT" stats --events 2000 --format prometheus >"$tmp/metrics.txt" || fail "gpurt stats failed"
promtool check metrics <"$tmp/metrics.txt" || fail "promtool check metrics found problems"
echo "ok: promtool check metrics"

# 2a. gpurt serves on a random free port; 2b. Prometheus scrapes it every second.
prom_start_gpurt - serve-demo --rate 2500 --events 20000 --wait-scrape 20 --linger 40
prom_start_prometheus
start=$(date +%s)
echo "ok: gpurt on 127.0.0.1:$gport, prometheus on 127.0.0.1:$pport"

# 2c. Live figures while the day runs (once Prometheus's first scrape started
# it and a tenth of it is done), as a user would see them with curl.
until grep -q " events " "$tmp/gpurt.log"; do
  [ $SECONDS -lt $deadline ] || fail "the day did not start (no scrape?)"
  kill -0 "$gpid" 2>/dev/null || fail "gpurt exited early"
  sleep 0.1
done
curl -sf "http://127.0.0.1:$gport/metrics" >"$tmp/live.txt" || fail "curl /metrics failed"
grep -q '^gpurt_alloc_reserved_bytes{device="0",allocator="dayshift",pool="all"} 536870912$' "$tmp/live.txt" ||
  fail "live /metrics lacks the reserved figure"
grep '^gpurt_alloc_largest_free_block_bytes{.*pool="all"}' "$tmp/live.txt" || fail "live /metrics lacks largest_free_block"

until grep -q "day done" "$tmp/gpurt.log"; do
  [ $SECONDS -lt $deadline ] || fail "the day did not finish in time"
  kill -0 "$gpid" 2>/dev/null || fail "gpurt exited early"
  sleep 0.2
done
sleep 3 # let Prometheus scrape the final state

# 3. Ask Prometheus what it saw.
q_range() {
  curl -sfG "http://127.0.0.1:$pport/api/v1/query_range" --data-urlencode "query=$1" \
    --data-urlencode "start=$start" --data-urlencode "end=$(date +%s)" --data-urlencode "step=1"
}
lfb=$(q_range 'gpurt_alloc_largest_free_block_bytes{pool="all"}' |
  jq -c '[.data.result[0].values[] | .[1] | tonumber | select(. > 0)]') || fail "query_range failed"
echo "largest_free_block samples (bytes): $lfb"
n=$(jq 'length' <<<"$lfb")
[ "$n" -ge 5 ] || fail "expected at least 5 samples of largest_free_block, got $n"
jq -e '(.[0:2] | add / length) > 1.2 * (.[-2:] | add / length)' <<<"$lfb" >/dev/null ||
  fail "largest_free_block did not sink over the day"
jq -e '(unique | length) >= 3' <<<"$lfb" >/dev/null || fail "largest_free_block did not move"
reserved=$(q_range 'gpurt_alloc_reserved_bytes{pool="all"}' |
  jq -c '[.data.result[0].values[] | .[1] | tonumber | select(. > 0)] | unique') || fail "query_range failed"
[ "$reserved" = "[536870912]" ] || fail "reserved was not flat: $reserved"
ooms=$(curl -sfG "http://127.0.0.1:$pport/api/v1/query" --data-urlencode 'query=gpurt_alloc_ooms_total' |
  jq -r '.data.result[0].value[1]') || fail "query failed"
[ "$ooms" = "1" ] || fail "expected the day-3 OOM, ooms_total=$ooms"
echo "ok: Prometheus saw reserved flat at $reserved, largest free block sinking, $ooms OOM"
