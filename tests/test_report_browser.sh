#!/usr/bin/env bash
# test_report_browser.sh — `gpurt report` pages in a real browser: Debian's
# chromium, headless, driven by playwright-core (tests/browser/report.mjs)
# over the report of each snapshot: the project's two GPU recordings
# (tests/data/gpu) and, when ../shared is there, the shipped ones. Each page
# must open offline with every view working: the verdict and contract drawn,
# a band's tooltip showing its stack, the state slider redrawing, no console
# error, no network request. Screenshots go to $GRT_SHOTS (default: a
# temporary folder, removed). Skips (77) when chromium, node or the driver
# (installed by scripts/test.sh: npm ci in tests/browser) is absent.
#   test_report_browser.sh GPURT_BIN
set -uo pipefail
gpurt=${1:?usage: test_report_browser.sh path/to/gpurt}
here=$(cd "$(dirname "$0")" && pwd)
browser=$(command -v chromium || command -v chromium-browser || true)
skip() { echo "test_report_browser: skipped: $*" >&2; exit 77; }
[ -n "$browser" ] || skip "chromium not installed (scripts/deps.sh installs it)"
command -v node >/dev/null || skip "node not installed"
[ -d "$here/browser/node_modules/playwright-core" ] ||
  skip "playwright-core not installed (scripts/test.sh runs npm ci in tests/browser)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
shots=${GRT_SHOTS:-$work/shots}
snapshots=("$here"/data/gpu/*.pickle)
shared=${GRT_SHARED_DIR:-}
if [ -n "$shared" ] && [ -d "$shared/traces/pytorch" ]; then
  snapshots+=("$shared"/traces/pytorch/*.pickle)
else
  echo "test_report_browser: the ../shared snapshots are skipped (set GRT_SHARED_DIR to ../shared)" >&2
fi
status=0
for snap in "${snapshots[@]}"; do
  name=$(basename "$snap" .pickle)
  "$gpurt" report "$snap" -o "$work/$name.html" >/dev/null || { echo "FAIL: gpurt report $name"; status=1; continue; }
  if grep -Eq '(src|href)="https?:' "$work/$name.html"; then echo "FAIL: $name refers to the network"; status=1; fi
  timeout 180 node "$here/browser/report.mjs" "$work/$name.html" "$shots/$name" "$browser" || status=1
done
# a compare page: two traces x three policies, one of which (bump's arena) dwarfs the others
{
  echo "gpurt-trace 1"
  for i in $(seq 0 39); do echo "alloc $i $(( (i % 7 + 1) * 65536 ))"; done
  for i in $(seq 0 2 39); do echo "free $i"; done
} > "$work/a.trace"
head -n 41 "$work/a.trace" > "$work/b.trace"
"$gpurt" compare "$work/a.trace" "$work/b.trace" --policies naive,caching,bump --html "$work/compare.html" \
  >/dev/null || { echo "FAIL: gpurt compare --html"; status=1; }
timeout 180 node "$here/browser/compare.mjs" "$work/compare.html" "$shots/compare" "$browser" || status=1
# whatif's page: the settings as the lines, one colour each
"$gpurt" whatif "$here/data/gpu/gpurt_transformer_snapshot.pickle" --html "$work/whatif.html" >/dev/null ||
  { echo "FAIL: gpurt whatif --html"; status=1; }
timeout 180 node "$here/browser/compare.mjs" "$work/whatif.html" "$shots/whatif" "$browser" || status=1
[ $status -eq 0 ] && echo "test_report_browser: ok (${#snapshots[@]} reports, a compare page, a whatif page)"
exit $status
