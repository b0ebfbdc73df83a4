#!/usr/bin/env bash
# test_report_html.sh — renders `gpurt replay --html` in headless Chromium and
# checks that the plots drew (the page's inline script counts plot lines with
# a rendered extent into <body data-plots-drawn="N">) and that the segment
# maps and summary table are in the DOM. Usage: test_report_html.sh GPURT_BIN
# Skips (77) when chromium is absent. Uses a hand-made trace from tests/data,
# so it needs no ../shared.
set -euo pipefail
gpurt=${1:?usage: test_report_html.sh path/to/gpurt}
here=$(cd "$(dirname "$0")" && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "test_report_html: skipped: chromium not installed (scripts/deps.sh installs it)" >&2
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# a trace with an OOM at 3 MiB for the naive policy and a segment map for both
{
  echo "gpurt-trace 1"
  for i in $(seq 0 39); do echo "alloc $i $(( (i % 7 + 1) * 65536 ))"; done
  for i in $(seq 0 2 39); do echo "free $i"; done
  for i in $(seq 40 59); do echo "alloc $i 1048576"; done
} > "$work/t.trace"
"$gpurt" compare "$work/t.trace" --policies naive,caching --capacity 12M --html "$work/report.html" > "$work/out.txt"
grep -q "report:" "$work/out.txt"
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --user-data-dir="$work/profile" \
  --dump-dom "file://$work/report.html" > "$work/dom.html" 2> "$work/chromium.log" || {
  echo "test_report_html: chromium failed:" >&2; tail -20 "$work/chromium.log" >&2; exit 1; }
drawn=$(grep -o 'data-plots-drawn="[0-9]*"' "$work/dom.html" | grep -o '[0-9]*' || echo 0)
# 3 plots x 2 policies
if [ "$drawn" != 6 ]; then echo "test_report_html: expected 6 drawn plot lines, found '$drawn'" >&2; exit 1; fi
for id in plot-reserved-0 plot-allocated-0 plot-largest-free-0 segmap-peak-0 segmap-peak-1 segmap-oom-0 summary; do
  grep -q "id=\"$id\"" "$work/dom.html" || { echo "test_report_html: no element #$id in the rendered page" >&2; exit 1; }
done
# every polyline has points
if grep -o '<polyline[^>]*points=""' "$work/dom.html" | grep -q .; then
  echo "test_report_html: an empty polyline" >&2; exit 1
fi
# no network: nothing in the page refers to http(s)
if grep -Eq 'src="https?:|href="https?:' "$work/report.html"; then echo "test_report_html: page refers to the network" >&2; exit 1; fi
echo "test_report_html: ok ($drawn plot lines drawn)"
