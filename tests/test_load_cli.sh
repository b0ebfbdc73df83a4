#!/usr/bin/env bash
# test_load_cli.sh — `gpurt load`: every method puts the file's bytes on the
# device (the checksums agree), --json, --cold, and a malformed file or a bad
# option refused with its reason.
set -euo pipefail
GPURT=${1:?usage: test_load_cli.sh PATH/TO/gpurt}
fail() { echo "FAIL: $*"; exit 1; }
if "$GPURT" load --help 2>&1 | grep -q "has no loader"; then
  echo "SKIPPED: this build has no loader (libjansson-dev, liburing-dev)"; exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$tmp" <<'PY'
import json, struct, sys, random
rng = random.Random(5)
def write(path, tensors, blobs, fix=None):
    h = json.dumps(tensors).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h) if fix is None else fix)); f.write(h); f.write(b"".join(blobs))
t, b, off = {}, [], 0
for i, n in enumerate([3, 4096, 100000, 1, 777777]):
    data = rng.randbytes(n * 2)
    t[f"w{i}"] = {"dtype": "BF16", "shape": [n], "data_offsets": [off, off + len(data)]}
    b.append(data); off += len(data)
t["__metadata__"] = {"format": "pt"}
write(sys.argv[1] + "/ok.safetensors", t, b)
t["w1"]["data_offsets"][0] += 2
write(sys.argv[1] + "/gap.safetensors", t, b)
PY
for m in iouring pread mmap naive; do
  out=$("$GPURT" load "$tmp/ok.safetensors" --method "$m" --chunk 64K --buffers 3) || fail "$m: $out"
  grep -q "5 of 5 tensors' device bytes equal the file's" <<<"$out" || fail "$m checksums: $out"
  grep -q "method $m" <<<"$out" || fail "$m header: $out"
done
out=$("$GPURT" load "$tmp/ok.safetensors" --cold --blob --list) || fail "--cold: $out"
grep -q "O_DIRECT\|O_DIRECT refused\|no direct I/O" <<<"$out" || fail "--cold says nothing of O_DIRECT: $out"
grep -q "1 device allocations" <<<"$out" || fail "--blob: $out"
[ "$(grep -c '^    w' <<<"$out")" -eq 5 ] || fail "--list: $out"
json=$("$GPURT" load "$tmp/ok.safetensors" --method pread --json) || fail "--json"
python3 -c 'import json,sys; d=json.loads(sys.argv[1]); assert d["checksums_equal"] == d["tensors"] == 5 and d["method"] == "pread" and d["bytes"] == 1763754, d' "$json" ||
  fail "--json: $json"
echo "ok: every method, --cold --blob --list, --json"
err=$("$GPURT" load "$tmp/gap.safetensors" 2>&1) && fail "a gapped file loaded"
grep -q "tensor 'w1': data_offsets begin at 8, where w0 ends at 6: a gap of unowned bytes" <<<"$err" || fail "gap: $err"
err=$("$GPURT" load "$tmp/ok.safetensors" --method fast 2>&1) && fail "--method fast accepted"
grep -q "wants one of iouring, pread, mmap, naive" <<<"$err" || fail "--method: $err"
set +e
"$GPURT" load "$tmp/ok.safetensors" --buffers 0 >/dev/null 2>&1; rc=$?
set -e
[ "$rc" -eq 2 ] || fail "--buffers 0: exit $rc"
echo "ok: malformed file and bad options refused"
