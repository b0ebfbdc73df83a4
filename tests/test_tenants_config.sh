#!/usr/bin/env bash
# test_tenants_config.sh — `gpurt tenants --config FILE`: the shipped example
# runs; a single closed-loop tenant's one request takes exactly its kernels'
# time (a fork: two 2000 ns branches on 50 SMs each side by side after a
# 2000 ns root, then 1001 ns on all 100: 5001 ns); every mistake in a file
# names the file, the line and the word, and exits 2; values the library
# refuses name the tenant and kernel, and exit 1.
set -euo pipefail
GPURT=${1:?usage: test_tenants_config.sh PATH/TO/gpurt}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
"$GPURT" tenants --config "$root/docs/examples/tenants-mps.conf" --alone >"$tmp/ex.txt" || fail "the example exited $?"
grep -q '^  infer ' "$tmp/ex.txt" && grep -q '^  train ' "$tmp/ex.txt" || fail "example: $(cat "$tmp/ex.txt")"
cat >"$tmp/dag.conf" <<'CONF'
gpu sms=100 memory=1G mode=time-slice horizon=1ns
tenant name=dag arrival=closed concurrency=1   # one request
kernel work=100000 sms=50
kernel work=100000 sms=50 after=0
kernel work=100000 sms=50 after=0
kernel work=100001 sms=200 after=1
CONF
"$GPURT" tenants --config "$tmp/dag.conf" --out "$tmp/dag.json" >"$tmp/dag.txt" || fail "dag exited $?"
line=$(grep '^  dag ' "$tmp/dag.txt")
read -r _ arrived completed _ _ p50 _ <<<"$line"
[ "$arrived" = 1 ] && [ "$completed" = 1 ] && [ "$p50" = "0.005" ] || fail "dag: $line"
grep -q "ended at 0.005 ms" "$tmp/dag.txt" || fail "dag end: $(head -1 "$tmp/dag.txt")"
[ -s "$tmp/dag.json" ] || fail "no timeline"

bad() { # FILE-CONTENT EXPECTED-MESSAGE [EXIT: 2, or 1 when the library refuses the values]
  printf '%s\n' "$1" >"$tmp/bad.conf"
  set +e
  err=$("$GPURT" tenants --config "$tmp/bad.conf" 2>&1 >/dev/null)
  rc=$?
  set -e
  [ $rc -eq "${3:-2}" ] || fail "'$1' exited $rc: $err"
  grep -qF "$2" <<<"$err" || fail "'$1': message '$err' lacks '$2'"
}
bad $'gpu sms=10\ntenant name=x\nkernel work=5 sms=1 bogus=1' "bad.conf:3: kernel: unknown key 'bogus'"
bad $'gpu mode=fast' "bad.conf:1: mode=fast: want time-slice, mps or mig"
bad $'tenant name=x\ngpu sms=10' "bad.conf:2: one gpu line, before the tenants"
bad $'kernel work=1' "bad.conf:1: a kernel line before any tenant line"
bad $'tenant name=x rate=abc' "bad.conf:1: tenant: rate=abc is not a valid value"
bad $'tenant name=x\ntenant name=y\nkernel work=1' "bad.conf:2: tenant 0 has no kernel line"
bad $'tenant name=x\nkernel sms=3' "tenant 0 kernel 0 has no work="
bad $'gpu sms=10\ntenant name=x arrival=poisson\nkernel work=10x1us' "grt_tenant_sim_add: GRT_ERR_INVALID_ARG (tenant 0 'x': Poisson needs rate_per_s" 1
bad $'gpu sms=10\ntenant name=x\nkernel work=10x1us after=3' "kernel 0 waits for kernel 3" 1
bad $'wat' "bad.conf:1: unknown line 'wat'"
set +e
err=$("$GPURT" tenants 2>&1); rc=$?
set -e
[ $rc -eq 2 ] && grep -q -- "--config FILE is required" <<<"$err" || fail "no --config: $rc $err"
echo "ok: tenants --config: example, exact DAG time, 11 refusals with their line"
