#!/usr/bin/env bash
# test_demo_priority.sh — `gpurt demo priority`: the virtual clock's latencies
# exactly, and recomputed here by a model of the rule alone: 6 low streams x
# 40 kernels of 1 ms and a high stream's 10 kernels of 0.2 ms, each ready
# 3.5 ms (a copy-engine gap) after the previous one finished, on 2 compute
# slots; a slot that frees takes the ready kernel of the greatest priority,
# the earliest ready first, and nothing is preempted. Latency = ready ->
# done. With the high stream at the greatest priority the latency alternates
# 0.7 and 0.5 ms (it waits for the next low kernel to end); at the same
# priority it waits behind the low kernels that were ready before it. The
# threads clock's latencies are measured (not asserted).
set -euo pipefail
GPURT=${1:?usage: test_demo_priority.sh PATH/TO/gpurt}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
has() { grep -Fxq -- "$2" "$1" || fail "no line '$2' in $(basename "$1"):"$'\n'"$(cat "$1")"; }

# model PRIORITY: "mean max" in ms, as the demo prints them
model() {
  awk -v HIPRIO="$1" '
    function push(st, pr) { q[++nq] = st; qp[nq] = pr; qk[nq] = ++order }
    function fill(   s, b, j) {
      for (s = 0; s < 2; s++) {
        if (run[s] >= 0) continue
        b = 0
        for (j = 1; j <= nq; j++)
          if (q[j] != "" && (!b || qp[j] < qp[b] || (qp[j] == qp[b] && qk[j] < qk[b]))) b = j
        if (!b) return
        run[s] = q[b]; until[s] = t + (q[b] == "hi" ? 200 : 1000); q[b] = ""
      }
    }
    BEGIN { # microseconds; low streams 0-5 issue first, the high stream starts with its gap
      for (i = 0; i < 6; i++) { left[i] = 40; push(i, 0) }
      run[0] = run[1] = -1; gap_end = 3500; hi_left = 10
      fill()
      while (1) {
        t = -1
        for (s = 0; s < 2; s++) if (run[s] >= 0 && (t < 0 || until[s] < t)) t = until[s]
        if (gap_end >= 0 && (t < 0 || gap_end < t)) t = gap_end
        if (t < 0) break
        for (s = 0; s < 2; s++) if (run[s] >= 0 && until[s] == t) {
          st = run[s]; run[s] = -1
          if (st == "hi") { lat = t - ready; sum += lat; if (lat > mx) mx = lat; if (--hi_left) gap_end = t + 3500 }
          else if (--left[st]) push(st, 0)
        }
        if (gap_end == t) { gap_end = -1; ready = t; push("hi", HIPRIO) }
        fill()
      }
      printf "%10.3f %10.3f\n", sum / 10 / 1000, mx / 1000
    }'
}

"$GPURT" demo priority >"$tmp/out.txt" || fail "demo priority failed: $(cat "$tmp/out.txt")"
out=$tmp/out.txt
has "$out" "(priority range [-5, 0]; ideal latency 0.2 ms; no preemption: at most one 1 ms kernel to wait for)"
same=$(model 0)
greatest=$(model -5)
[ "$same" = "     2.600      2.700" ] && [ "$greatest" = "     0.600      0.700" ] || fail "model: $same / $greatest"
has "$out" "$(printf '  %-8s %-28s %s' virtual "priority 0 (same as load)" "$same")"
has "$out" "$(printf '  %-8s %-28s %s' virtual "priority -5 (greatest)" "$greatest")"
grep -Eq '^  threads  priority 0 \(same as load\) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$' "$out" || fail "threads row, priority 0"
grep -Eq '^  threads  priority -5 \(greatest\) +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3}$' "$out" || fail "threads row, priority -5"
has "$out" "with priorities a ready high-priority kernel takes the next free slot"
echo "ok: virtual latencies $same (same priority), $greatest (greatest)"
