# prometheus_lib.sh — sourced by the tests that have a real Prometheus scrape
# gpurt's /metrics (tests/test_report_prometheus*.sh): tool checks, bounded
# start-up of both servers on random loopback ports, and clean-up on any exit.
# The sourcing script sets GPURT (the CLI) first.

# Exit 77 (skip) with a message when a tool or the /metrics server is missing.
prom_require_tools() {
  local tool
  for tool in prometheus promtool curl jq; do
    if ! command -v "$tool" >/dev/null; then
      echo "SKIPPED: '$tool' is not installed (Debian packages prometheus, curl, jq; scripts/deps.sh installs them)"
      exit 77
    fi
  done
  if ! "$GPURT" serve-demo --help >/dev/null 2>&1; then
    echo "SKIPPED: this gpurt was built without libmicrohttpd (no /metrics server)"
    exit 77
  fi
}

tmp=$(mktemp -d)
gpid="" ppid_=""
stop() { # pid: TERM, then KILL after 10 s
  [ -n "$1" ] || return 0
  kill "$1" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
}
cleanup() { stop "$gpid"; stop "$ppid_"; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "FAIL: $*"
  echo "--- gpurt log:"; cat "$tmp/gpurt.log" 2>/dev/null
  echo "--- prometheus log (tail):"; tail -n 20 "$tmp/prom.log" 2>/dev/null
  exit 1
}
deadline=$((SECONDS + 55))
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
random_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    port_busy "$p" || { echo "$p"; return 0; }
  done
  return 1
}

# prom_start_gpurt STDOUT_FILE ARGS...: runs `$GPURT ARGS... --serve 127.0.0.1:PORT`
# on a random free port (retried if taken meanwhile); stderr goes to
# $tmp/gpurt.log, stdout to STDOUT_FILE ("-": into the log too). Sets gport and gpid.
prom_start_gpurt() {
  local out=$1
  shift
  for _ in 1 2 3 4 5; do
    gport=$(random_port) || fail "no free port"
    if [ "$out" = - ]; then
      "$GPURT" "$@" --serve "127.0.0.1:$gport" >"$tmp/gpurt.log" 2>&1 &
    else
      "$GPURT" "$@" --serve "127.0.0.1:$gport" >"$out" 2>"$tmp/gpurt.log" &
    fi
    gpid=$!
    for _ in $(seq 1 100); do
      grep -q "serving metrics at" "$tmp/gpurt.log" && break
      kill -0 "$gpid" 2>/dev/null || break
      sleep 0.1
    done
    grep -q "serving metrics at" "$tmp/gpurt.log" && return 0
    stop "$gpid" # still running without serving (a plain wait could block for good)
    wait "$gpid" 2>/dev/null || true # it failed (e.g. the port was taken meanwhile): try another
    gpid=""
  done
  fail "gpurt $1 --serve did not start"
}

# prom_start_prometheus: Prometheus on another random port, scraping gpurt
# every second (temporary config and data folder). Sets pport and ppid_.
prom_start_prometheus() {
  cat >"$tmp/prom.yml" <<YAML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: gpurt
    static_configs:
      - targets: ['127.0.0.1:$gport']
YAML
  for _ in 1 2 3 4 5; do
    pport=$(random_port) || fail "no free port"
    prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/data" \
      --web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prom.log" 2>&1 &
    ppid_=$!
    for _ in $(seq 1 100); do
      curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null && break
      kill -0 "$ppid_" 2>/dev/null || break
      sleep 0.1
    done
    curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null && return 0
    stop "$ppid_"
    ppid_=""
  done
  fail "prometheus did not become ready"
}
