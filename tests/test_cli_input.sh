#!/usr/bin/env bash
# test_cli_input.sh — what the CLI reads: a gzip or zstd file (by its magic,
# whatever its name), standard input (`-`), a named pipe, each giving the
# figures of the plain file; /dev/zero and an endless pipe stop at
# --max-input-size or at a memory limit with a clear error, never by
# eating the machine; a truncated or corrupt stream is refused.
set -euo pipefail
GPURT=${1:?usage: test_cli_input.sh PATH/TO/gpurt}
DATA=$(dirname "$0")/data
fail() { echo "FAIL: $*"; exit 1; }
for tool in gzip zstd; do command -v $tool >/dev/null || fail "$tool is not installed (scripts/deps.sh installs it)"; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
plain="$DATA/native_small.trace"
figures() { "$GPURT" replay --json --no-search "$@" | sed -E 's/"trace":"[^"]*",//'; }
want=$(figures "$plain")
gzip -c "$plain" >"$tmp/a.gz"
zstd -q -c "$plain" >"$tmp/a.zst"
cp "$tmp/a.gz" "$tmp/misnamed.trace" # the magic decides, not the name
[ "$(figures "$tmp/a.gz")" = "$want" ] || fail "gzip: $(figures "$tmp/a.gz")"
[ "$(figures "$tmp/a.zst")" = "$want" ] || fail "zstd"
[ "$(figures "$tmp/misnamed.trace")" = "$want" ] || fail "gzip under a .trace name"
[ "$(figures - <"$plain")" = "$want" ] || fail "stdin"
[ "$(cat "$tmp/a.zst" | figures -)" = "$want" ] || fail "zstd on a pipe"
mkfifo "$tmp/fifo"
(cat "$plain" >"$tmp/fifo" &)
[ "$(figures "$tmp/fifo")" = "$want" ] || fail "a named pipe"
# a gzip file of two members (gzip -c a >x; gzip -c b >>x) is one stream of both
head -n 6 "$plain" | gzip -c >"$tmp/two.gz"
tail -n +7 "$plain" | gzip -c >>"$tmp/two.gz"
[ "$(figures "$tmp/two.gz")" = "$want" ] || fail "a two-member gzip"
echo "ok: gzip, zstd, stdin, pipes"
set +e
err=$("$GPURT" stats /dev/zero --max-input-size 8M 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "more than --max-input-size 8388608 bytes" <<<"$err" || fail "/dev/zero: exit $rc: $err"
err=$(yes | "$GPURT" replay - --max-input-size 1M 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "standard input: more than --max-input-size 1048576" <<<"$err" || fail "endless pipe: exit $rc: $err"
# a sanitizer's shadow memory cannot live under an address-space limit: that case is the plain build's
if grep -qE '^GRT_SANITIZE:STRING=.+' "$(dirname "$GPURT")/../CMakeCache.txt" 2>/dev/null; then
  echo "note: /dev/zero under ulimit -v is not run in a sanitizer build"
else
  err=$( (ulimit -v 400000; "$GPURT" stats /dev/zero) 2>&1); rc=$?
  [ $rc -eq 1 ] && grep -q "out of host memory at" <<<"$err" || fail "/dev/zero under a memory limit: exit $rc: $err"
fi
err=$("$GPURT" replay "$plain" --max-input-size 100 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "more than --max-input-size 100" <<<"$err" || fail "a regular file above the cap: $err"
size=$(stat -c %s "$plain") # the cap is exact, for a file and for what a decoder writes (a snapshot holds it)
for f in "$plain" "$tmp/a.gz" "$tmp/a.zst"; do
  "$GPURT" stats "$f" --format snapshot --max-input-size "$size" >/dev/null 2>"$tmp/err" ||
    fail "$f at exactly the cap: $(cat "$tmp/err")"
  "$GPURT" stats "$f" --format snapshot --max-input-size $((size - 1)) >/dev/null 2>&1 &&
    fail "$f one byte above the cap was read"
  # a compressed native trace streams, never held: the cap does not apply
  [ "$f" = "$plain" ] || "$GPURT" stats "$f" --max-input-size 100 >/dev/null 2>"$tmp/err" ||
    fail "$f streamed under a small cap: $(cat "$tmp/err")"
done
head -c 60 "$tmp/a.gz" >"$tmp/cut.gz"
err=$("$GPURT" replay "$tmp/cut.gz" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "the gzip stream ends early" <<<"$err" || fail "a cut gzip: $err"
printf '\x28\xb5\x2f\xfdjunkjunk' >"$tmp/bad.zst"
err=$("$GPURT" replay "$tmp/bad.zst" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "zstd: " <<<"$err" || fail "a corrupt zstd: $err"
: >"$tmp/empty"
err=$("$GPURT" replay - <"$tmp/empty" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "empty input" <<<"$err" || fail "empty stdin: $err"
err=$("$GPURT" replay x --max-input-size lots 2>&1); rc=$?
[ $rc -eq 2 ] || fail "--max-input-size lots: exit $rc"
set -e
echo "ok: /dev/zero, an endless pipe, a memory limit, the cap, cut and corrupt streams"
