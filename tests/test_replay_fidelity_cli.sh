#!/usr/bin/env bash
# test_replay_fidelity_cli.sh — `gpurt replay --fidelity` on the snapshot
# recorded on a GPU (tests/data/gpu): a table per device, --json one object
# per device with every column, --device narrowing, and the refusals.
set -uo pipefail
GPURT=${1:?usage: test_replay_fidelity_cli.sh PATH/TO/gpurt}
DATA=$(cd "$(dirname "$0")/data" && pwd)
SNAP=$DATA/gpu/gpurt_transformer_expandable_snapshot.pickle
fail() { echo "FAIL: $*"; exit 1; }

out=$("$GPURT" replay --fidelity "$SNAP") || fail "--fidelity failed: $out"
grep -q "^gpurt replay --fidelity: gpurt_transformer_expandable_snapshot.pickle (device 0 of 1, 13752 events)" \
  <<<"$out" || fail "no device header: $out"
grep -q "segment decisions      78/78 agree (100.00%)" <<<"$out" || fail "segment decisions: $out"
grep -q "releases               none recorded" <<<"$out" || fail "releases: $out"
grep -q "^exact-address match: 4560/4560 (100.00%)$" <<<"$out" || fail "last line: $out"
echo "ok: text report"

json=$("$GPURT" replay --fidelity --json "$SNAP") || fail "--fidelity --json failed"
[ "$(wc -l <<<"$json")" -eq 1 ] || fail "one device, one line: $json"
for kv in '"device": 0' '"allocs": 4560' '"exact": 4560' '"segment_decisions": 78' \
  '"segment_decisions_agree": 78' '"releases_recorded": 0' '"releases_agree": 0' '"ooms_recorded": 0' \
  '"ooms_agree": 0' '"final_layout_equal": true'; do
  grep -qF "$kv" <<<"$json" || fail "--json lacks $kv: $json"
done
echo "ok: --json"

narrowed=$("$GPURT" replay --fidelity --json --device 0 "$SNAP") || fail "--device 0 failed"
[ "$narrowed" = "$json" ] || fail "--device 0 differs from every device: $narrowed"
err=$("$GPURT" replay --fidelity --device 1 "$SNAP" 2>&1) && fail "--device 1 accepted"
grep -q "device 1 out of range: the snapshot has 1 device traces" <<<"$err" || fail "--device 1: $err"
err=$("$GPURT" replay --fidelity "$DATA/rmm_small.csv" 2>&1) && fail "an RMM trace accepted"
grep -q "fidelity needs a PyTorch snapshot" <<<"$err" || fail "rmm: $err"
echo "ok: --device and refusals"
