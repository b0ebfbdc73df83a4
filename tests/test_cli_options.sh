#!/usr/bin/env bash
# test_cli_options.sh — how every gpurt command reads its options: --opt=value
# and --opt value, unique abbreviations, one message format (and exit status 2)
# for an unknown or ambiguous option and a missing value, strict numbers and
# sizes, --version from CMake's project(), `gpurt help CMD` == `gpurt CMD
# --help`, and the option conflicts each command refuses. Uses only the
# hand-made traces in tests/data.
set -uo pipefail
GPURT=${1:?usage: test_cli_options.sh PATH/TO/gpurt}
HERE=$(cd "$(dirname "$0")" && pwd)
DATA=$HERE/data
TRACE=$DATA/rmm_small.csv
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ok ARGS...: exit status 0
ok() {
  "$GPURT" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt" || fail "gpurt $* failed: $(cat "$tmp/err.txt")"
}
# refused PATTERN ARGS...: exit status 2, nothing on stdout, one line on stderr
# naming the command and pointing at its help, matching the grep -E PATTERN
refused() {
  local pattern=$1
  shift
  "$GPURT" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  [ $rc -eq 2 ] || fail "gpurt $*: exit status $rc, not 2"
  [ ! -s "$tmp/out.txt" ] || fail "gpurt $*: refused but printed on stdout"
  [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] || fail "gpurt $*: not one line on stderr: $(cat "$tmp/err.txt")"
  grep -qE "^gpurt( [a-z -]+)?: .*\(see gpurt help( [a-z -]+)?\)$" "$tmp/err.txt" ||
    fail "gpurt $*: message not in the common format: $(cat "$tmp/err.txt")"
  grep -qE -- "$pattern" "$tmp/err.txt" || fail "gpurt $*: message lacks /$pattern/: $(cat "$tmp/err.txt")"
}

# --- the two forms of a value, abbreviations ---
ok replay "$TRACE" --capacity 24G
cp "$tmp/out.txt" "$tmp/spaced.txt"
ok replay "$TRACE" --capacity=24G
cmp -s "$tmp/out.txt" "$tmp/spaced.txt" || fail "--capacity=24G and --capacity 24G differ"
ok replay --cap 24G "$TRACE"
cmp -s "$tmp/out.txt" "$tmp/spaced.txt" || fail "--cap 24G (before TRACE) differs from --capacity 24G"
ok replay --cap=24G -- "$TRACE"
cmp -s "$tmp/out.txt" "$tmp/spaced.txt" || fail "--cap=24G -- TRACE differs"
ok stats "$TRACE" --form=json
grep -q '"allocated_bytes.all.allocated"' "$tmp/out.txt" || fail "stats --form=json"
ok stats --ev 2000 --abbrev
ok demo frag --seeds=1 --capacity-m 256 --pol naive
mkdir "$tmp/no-traces"
ok bench --only=w3 --tr "$tmp/no-traces"
grep -q "W3     skipped" "$tmp/out.txt" || fail "bench --only=w3 --tr DIR"
echo "ok: --opt=value, --opt value, abbreviations, TRACE before or after"

# --- unknown, ambiguous, missing value, value given to a flag ---
refused "unknown option '--bogus'" replay "$TRACE" --bogus
refused "unknown option '--bogus'" compare --bogus "$TRACE"
refused "unknown option '--bogus'" stats --bogus
refused "unknown option '--bogus'" bench --bogus
refused "unknown option '--bogus'" serve-demo --bogus
refused "unknown option '--bogus'" demo --bogus
refused "unknown option '--bogus'" demo frag --bogus
refused "unknown option '--bogus'" demo priority --bogus
refused "unknown option '-x'" replay -x "$TRACE"
refused "^gpurt: unknown option '--bogus'" --bogus
refused "option '--c' is ambiguous: --capacity, --conf, --csv" replay "$TRACE" --c 1G
refused "option '--no' is ambiguous: --no-releases, --no-search" replay "$TRACE" --no
refused "option '--c' is ambiguous: --capacity, --conf" stats --c 1
refused "^gpurt replay: option '--capacity' requires a value \(see gpurt help replay\)$" replay "$TRACE" --capacity
refused "option '--policy' requires a value" replay "$TRACE" --pol
refused "option '--events' requires a value" stats --events
refused "option '--out' requires a value" demo streams --out
refused "option '--json' takes no value" replay "$TRACE" --json=yes
refused "unexpected argument 'extra'" demo frag extra
refused "unexpected argument 'extra'" bench extra
refused "one trace at a time" replay "$TRACE" "$TRACE"
refused "unknown command 'nosuch'" nosuch
refused "unknown demo 'nosuch'" demo nosuch
echo "ok: unknown, ambiguous, missing values: one message format, exit status 2"

# --- strict numbers: garbage, a sign, overflow, empty; each names option and value ---
for bad in abc 1x -1 " 1" 99999999999999999999999 ""; do
  refused "option '--device' wants an integer from 0 to 1024, got '$bad'" replay "$TRACE" --device "$bad"
  refused "option '--device' .*got '$bad'" stats "$TRACE" --device "$bad"
  refused "option '--device' .*got '$bad'" compare "$TRACE" --device "$bad"
  refused "option '--events' .*got '$bad'" stats --events "$bad"
  refused "option '--seed' .*got '$bad'" stats --seed "$bad"
  refused "option '--runs' .*got '$bad'" bench --runs "$bad"
  refused "option '--seeds' .*got '$bad'" demo frag --seeds "$bad"
  refused "option '--steps' .*got '$bad'" demo graphs --steps "$bad"
done
refused "option '--device' .*got ''" replay "$TRACE" --device=
refused "option '--device' .*got '1025'" replay "$TRACE" --device 1025
refused "option '--runs' .*got '0'" bench --runs 0
refused "option '--iterations' .*got '4294967296'" bench --iterations 4294967296
refused "option '--capacity-mb' .*got '63'" demo frag --capacity-mb 63
refused "option '--capacity-mb' .*got '18446744073709551615'" demo frag --capacity-mb 18446744073709551615
refused "option '--events' wants an integer >= 100, got '99'" stats --workload dayshift --events 99
refused "option '--events' .*got '99'" serve-demo --events 99
refused "option '--policies' wants policies from naive, .*got 'nope'" compare "$TRACE" --policies caching,nope
refused "option '--policies' wants policies from naive, .*got 'nope'" demo frag --policies nope
for bad in abc 16X 1.5GiBx -1G nan inf 0 0.5 "" 18446744073709551616 99999999999T 1e30G 0x10G 0X400M; do
  refused "option '--capacity' wants a size .*got '$bad'" replay "$TRACE" --capacity "$bad"
  refused "option '--capacity' .*got '$bad'" stats "$TRACE" --capacity "$bad"
  refused "option '--capacity' .*got '$bad'" compare "$TRACE" --capacity "$bad"
done
for good in 1048576 512M 512m 16G 1.5GiB 64k 2TB 4096b; do
  ok replay "$TRACE" --capacity "$good" --no-search --device-model contiguous
done
ok replay "$TRACE" --capacity 2M --no-search
refused "--capacity below 2 MiB: a paged device holds whole 2 MiB pages" replay "$TRACE" --capacity 1M
refused "--capacity below 2 MiB: a paged device holds whole 2 MiB pages" stats "$TRACE" --capacity 1M
refused "--capacity below 2 MiB: a paged device holds whole 2 MiB pages" compare "$TRACE" --capacity 1M
refused "option '--device-model' wants one of contiguous, paged, got 'flat'" replay "$TRACE" --device-model flat
refused "option '--device-model' .*got 'flat'" compare "$TRACE" --device-model flat
refused "--fidelity does not combine with --device-model" replay "$TRACE" --fidelity --device-model paged
refused "--fidelity does not combine with --fail-on-oom" replay "$TRACE" --fidelity --fail-on-oom
refused "--serve does not combine" replay "$TRACE" --serve 127.0.0.1:0 --fail-on-oom
# the trace's recorded allocate failure fails again: exit 3 with --fail-on-oom, 0 without
"$GPURT" replay "$TRACE" --no-search --fail-on-oom >/dev/null 2>&1
[ $? -eq 3 ] || fail "replay --fail-on-oom: the recorded failure fails again, exit should be 3"
ok replay "$TRACE" --no-search
for bad in abc -1 1x "" 1e400 nan 10000001; do
  refused "option '--rate' wants a number from 0 to 1e\+07, got '$bad'" \
    replay "$TRACE" --serve 127.0.0.1:0 --rate "$bad"
  refused "option '--linger' .*got '$bad'" replay "$TRACE" --serve 127.0.0.1:0 --linger "$bad"
done
# serve-demo reads its options only in a gpurt built with the /metrics server
if "$GPURT" serve-demo --help >/dev/null 2>&1; then
  refused "option '--seed' .*got '1x'" serve-demo --seed 1x
  refused "option '--wait-scrape' .*got '-1'" serve-demo --wait-scrape -1
  refused "unexpected argument 'extra'" serve-demo extra
fi
refused "option '--format' wants one of summary, json, snapshot, prometheus, got 'xml'" stats "$TRACE" --format xml
refused "option '--placement' wants one of auto, first-fit, recorded, got 'best'" replay "$TRACE" --placement best
refused "option '--workload' wants one of dayshift" stats --workload night
refused "option '--policies' wants a comma-separated list, got ','" compare "$TRACE" --policies ,
refused "option '--only': 'w9' is not one of" bench --only w1,w9
echo "ok: strict numbers, sizes and choices"

# --- version and help ---
want=$(sed -nE 's/^project\(gpurt VERSION ([0-9][0-9.]*).*/\1/p' "$HERE/../CMakeLists.txt")
[ -n "$want" ] || fail "no project(gpurt VERSION ...) in CMakeLists.txt"
for args in --version version --vers; do
  ok $args
  [ "$(cat "$tmp/out.txt")" = "gpurt $want" ] || fail "gpurt $args printed '$(cat "$tmp/out.txt")', not 'gpurt $want'"
done
refused "unexpected argument 'x'" version x
ok --help
cp "$tmp/out.txt" "$tmp/general.txt"
grep -q "^usage: gpurt <command>" "$tmp/general.txt" || fail "gpurt --help: no usage line"
for args in -h help "help help"; do
  ok $args
  cmp -s "$tmp/out.txt" "$tmp/general.txt" || fail "gpurt $args differs from gpurt --help"
done
for cmd in demo bench stats serve-demo replay compare version "demo all" "demo frag" "demo emptycache" \
  "demo streams" "demo staging" "demo graphs" "demo priority"; do
  "$GPURT" $cmd --help >"$tmp/a.txt" 2>&1
  rc_a=$?
  "$GPURT" help $cmd >"$tmp/b.txt" 2>&1
  rc_b=$?
  [ $rc_a -eq $rc_b ] && cmp -s "$tmp/a.txt" "$tmp/b.txt" || fail "gpurt help $cmd differs from gpurt $cmd --help"
  "$GPURT" $cmd -h >"$tmp/c.txt" 2>&1
  cmp -s "$tmp/a.txt" "$tmp/c.txt" || fail "gpurt $cmd -h differs from gpurt $cmd --help"
  if [ "$cmd" != serve-demo ]; then # serve-demo --help needs the /metrics server built in
    [ $rc_a -eq 0 ] && grep -q "usage: gpurt" "$tmp/a.txt" || fail "gpurt $cmd --help: no usage (exit $rc_a)"
  fi
done
ok stats --format xml --help # help wins over a mistake elsewhere
grep -q "^usage: gpurt stats" "$tmp/out.txt" || fail "stats --format xml --help: no usage"
ok replay --hel
grep -q "^usage: gpurt replay" "$tmp/out.txt" || fail "replay --hel: no usage"
refused "unknown command 'nosuch'" help nosuch
refused "unknown demo 'nosuch'" help demo nosuch
echo "ok: --version, version, help, help CMD == CMD --help"

# --- conflicts ---
refused "--csv and --json" replay "$TRACE" --csv --json
refused "--serve does not combine" replay "$TRACE" --serve 127.0.0.1:0 --csv
refused "--serve does not combine" replay "$TRACE" --serve 127.0.0.1:0 --json
refused "--serve does not combine" replay "$TRACE" --serve 127.0.0.1:0 --html "$tmp/r.html"
refused "--serve does not combine" replay "$TRACE" --serve 127.0.0.1:0 --fidelity
refused "--serve does not combine" replay "$TRACE" --serve 127.0.0.1:0 --search
refused "--search and --no-search" replay "$TRACE" --search --no-search
refused "--fidelity does not combine with --policy" replay "$TRACE" --fidelity --policy naive
refused "--fidelity does not combine with --placement first-fit" replay "$TRACE" --fidelity --placement first-fit
refused "--fidelity does not combine with --capacity" replay "$TRACE" --fidelity --capacity 1G
refused "--fidelity does not combine with --conf" replay "$TRACE" --fidelity --conf max_split_size_mb:64
refused "--fidelity does not combine with --no-releases" replay "$TRACE" --fidelity --no-releases
refused "--fidelity does not combine with --search" replay "$TRACE" --fidelity --search
refused "--fidelity does not combine with --csv" replay "$TRACE" --fidelity --csv
refused "--fidelity does not combine with --html" replay "$TRACE" --fidelity --html "$tmp/r.html"
for opt in rate wait-scrape linger; do
  refused "--$opt goes with --serve" replay "$TRACE" --$opt 1
done
refused "--workload is for the built-in workload, not a trace" stats "$TRACE" --workload dayshift
refused "--events is for the built-in workload" stats "$TRACE" --events 2000
refused "--seed is for the built-in workload" stats "$TRACE" --seed 3
for opt in "--policy naive" "--capacity 1G" "--conf max_split_size_mb:64" "--device 0"; do
  refused "${opt%% *} goes with a trace" stats --workload dayshift $opt
  refused "${opt%% *} goes with a trace" stats $opt
done
refused "--abbreviated shortens the summary" stats "$TRACE" --format json --abbreviated
refused "--traces is W3's" bench --only w1 --traces "$DATA"
[ ! -e "$tmp/r.html" ] || fail "a refused command wrote its report"
echo "ok: conflicting options refused"

# --- the allocator settings: refused before any trace is read, notes for keys without effect ---
refused "--conf 'bogus:1': unknown key 'bogus'" replay "$TRACE" --conf bogus:1
refused "--conf 'max_split_size_mb:8': .*too small" compare "$TRACE" --conf max_split_size_mb:8
refused "--conf .*cudaMallocAsync" stats "$TRACE" --conf backend:cudaMallocAsync
refused "option '--memory-fraction' wants a share of the device above 0, up to 1, got '0'" replay "$TRACE" --memory-fraction 0
refused "option '--memory-fraction' wants a number from 0 to 1, got '1.5'" stats "$TRACE" --memory-fraction 1.5
ok replay "$TRACE" --conf release_lock_on_cudamalloc:True,garbage_collection_threshold:0.6
grep -q "^gpurt replay: note: release_lock_on_cudamalloc: accepted, no effect" "$tmp/err.txt" ||
  fail "no note for release_lock_on_cudamalloc: $(cat "$tmp/err.txt")"
grep -q "^gpurt replay: note: garbage_collection_threshold: no effect without a memory fraction" "$tmp/err.txt" ||
  fail "no note for the threshold without a fraction: $(cat "$tmp/err.txt")"
ok replay "$TRACE" --conf garbage_collection_threshold:0.6 --memory-fraction 0.9
! grep -q "note: garbage_collection_threshold" "$tmp/err.txt" || fail "--memory-fraction did not set the fraction"
echo "ok: allocator settings"
