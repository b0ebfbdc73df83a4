#!/usr/bin/env bash
# test_demo_streams.sh — `gpurt demo streams`: the virtual clock's figures
# exactly, each recomputed here from the model's parameters (8 chunks of
# 256 KiB at 0.128 GB/s: th = td = 2.048 ms per copy, tc = 2 ms per kernel):
#   S1 one stream:         8 x (th + tc + td)           = 48.768 ms
#   S1 three streams:      8 x th + tc + td             = 20.432 ms (the H2D
#                          engine is the bottleneck: tc < th)
#   S2 legacy + blocking:  each legacy kernel waits for the chunk's H2D and
#                          the previous D2H, and the next H2D waits for it:
#                          th + 8 x tc + 8 x th         = 34.432 ms
#   S2 legacy + non-blocking copy streams = the three streams of S1.
# S3's counts over the virtual clock's 3 x 81 schedules and the deadlock
# reports of S4 are deterministic too. The threads clock's times are
# measured (not asserted); what it must show regardless of timing — the
# sanitizer flags every host-order free and no stream-ordered one, the
# stream-ordered free never corrupts, every deadlock is reported with its
# cycle — is.
set -euo pipefail
GPURT=${1:?usage: test_demo_streams.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
has() { grep -Fxq -- "$2" "$1" || fail "no line '$2' in $(basename "$1"):"$'\n'"$(cat "$1")"; }
# like has, for an extended regular expression matching the whole line
matches() { grep -Exq -- "$2" "$1" || fail "no line matching /$2/ in $(basename "$1"):"$'\n'"$(cat "$1")"; }
# ms NS: nanoseconds as the demo prints milliseconds (%.3f)
ms() { printf '%d.%03d' $(($1 / 1000000)) $(($1 / 1000 % 1000)); }

"$GPURT" demo streams --out "$tmp/tl" >"$tmp/out.txt" || fail "demo streams failed: $(cat "$tmp/out.txt")"
out=$tmp/out.txt

th=$((262144 * 1000 / 128)) # ns per 256 KiB copy at 0.128 GB/s
tc=2000000
[ $th -eq 2048000 ] || fail "copy time arithmetic"
serial=$((8 * (th + tc + th)))
piped=$((8 * th + tc + th))
legacy=$((th + 8 * tc + 8 * th))

# --- S1, S2: virtual clock ---
has "$out" "$(printf '  %-8s %-18s %9s ms %13s ms %9s %s' virtual "1 stream" "$(ms $serial)" "$(ms $serial)" "" "(exact)")"
speedup=$(awk -v a=$serial -v b=$piped 'BEGIN { printf "%.2fx", a / b }')
has "$out" "$(printf '  %-8s %-18s %9s ms %13s ms %9s %s' virtual "3 streams + events" "$(ms $piped)" "$(ms $piped)" \
  "$speedup" "(exact)")"
has "$out" "  virtual  1 stream              48.768 ms        48.768 ms           (exact)"
has "$out" "  virtual  3 streams + events    20.432 ms        20.432 ms     2.39x (exact)"
has "$out" "$(printf '  %-8s %-43s %9s ms' virtual "legacy compute + blocking copy streams" "$(ms $legacy)")"
has "$out" "$(printf '  %-8s %-43s %9s ms' virtual "legacy compute + non-blocking copy streams" "$(ms $piped)")"
has "$out" "$(printf '  %-8s %-43s %9s ms' virtual "three non-blocking streams (S1)" "$(ms $piped)")"
slower=$(awk -v a=$legacy -v b=$piped 'BEGIN { printf "%.0f", 100 * (a / b - 1) }')
has "$out" "  virtual  lost overlap: $(ms $((legacy - piped))) ms (${slower}% slower) — the legacy stream's implicit barriers"
has "$out" "  virtual  lost overlap: 14.000 ms (69% slower) — the legacy stream's implicit barriers"
# the threads clock: the DAG's predictions are printed beside the measurements
matches "$out" "  threads  1 stream +[0-9]+\.[0-9]{3} ms +48\.768 ms +(\(exact\))?"
matches "$out" "  threads  3 streams \+ events +[0-9]+\.[0-9]{3} ms +20\.432 ms +[0-9]+\.[0-9]{2}x +(\(exact\))?"
echo "ok: S1, S2 on the virtual clock ($(ms $serial), $(ms $piped), $(ms $legacy) ms)"

# --- S3: virtual 3 seeds x 81 schedules (every combination of 3 durations at 4 points) ---
has "$out" "  virtual  sanitizer: race on 0x7f0000000000: free by 'host-order free' on stream 'host' (#245) is not ordered after read by 'read B' on stream 'A (reader)' (#407)"
has "$out" "  virtual  gated run (writer lands first): host-order free CORRUPTED (checksum mismatch), stream-ordered free clean"
has "$out" "  virtual  $((3 * 3 ** 4)) schedules: host-order free corrupted 119 (49%), stream-ordered free corrupted 0"
has "$out" "  virtual  sanitizer flagged the host-order free on 243/243 schedules, the stream-ordered free on 0/243"
matches "$out" "  threads  1000 schedules: host-order free corrupted [0-9]+ \([0-9]+%\), stream-ordered free corrupted 0"
has "$out" "  threads  sanitizer flagged the host-order free on 1000/1000 schedules, the stream-ordered free on 0/1000"
matches "$out" "  threads  gated run \(writer lands first\): host-order free [A-Za-z() -]+, stream-ordered free clean"
echo "ok: S3 lifetime counts"

# --- S4: the same reports on both clocks ---
for clock in virtual threads; do
  has "$out" "  $clock  user events waited in a cycle across 2 streams       -> GRT_ERR_DEADLOCK"
  has "$out" "  $clock  3 streams: user events + one plain event edge        -> GRT_ERR_DEADLOCK"
  has "$out" "  $clock  host function waits for work issued after it         -> GRT_ERR_DEADLOCK"
  has "$out" "  $clock  host function waits for a stream that waits for it   -> GRT_ERR_DEADLOCK"
  has "$out" "  $clock  plain events recorded and waited 'in a cycle'        -> GRT_OK"
done
for msg in \
  "deadlock: a cycle of 2 waits: stream 'B' waits for user event 'u2' >= 1, signalled by queued work on stream 'A'; stream 'A' waits for user event 'u1' >= 1, signalled by queued work on stream 'B' [cycle: B -> A -> B]" \
  "deadlock: a cycle of 3 waits: stream 'C' waits for user event 'u2' >= 1, signalled by queued work on stream 'B'; stream 'B' waits for event 'eA' recorded on stream 'A'; stream 'A' waits for user event 'u1' >= 1, signalled by queued work on stream 'C' [cycle: C -> B -> A -> C]" \
  "deadlock: a cycle of 1 wait: a host function on stream 'A' waits for user event 'u1' >= 1, signalled only by later work on stream 'A' [cycle: A -> A] (the host function's wait returned GRT_ERR_DEADLOCK)" \
  "deadlock: a cycle of 2 waits: stream 'B' waits for event 'eA' recorded on stream 'A'; a host function on stream 'A' waits for user event 'u1' >= 1, signalled only by later work on stream 'B' [cycle: B -> A -> B] (the host function's wait returned GRT_ERR_DEADLOCK)"; do
  [ "$(grep -Fxc -- "           $msg" "$out")" -eq 2 ] || fail "not once per clock: $msg"
done
echo "ok: S4 deadlock reports"

has "$out" "all scenarios behaved as expected"
for f in s1_overlap s2_false_serialization s3_lifetime s4_deadlock; do
  for clock in virtual threads; do
    [ -s "$tmp/tl/${f}_$clock.json" ] || fail "no timeline ${f}_$clock.json"
    has "$out" "  timeline: $tmp/tl/${f}_$clock.json"
  done
done
echo "ok: eight timelines"
