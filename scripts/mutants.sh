#!/usr/bin/env bash
# scripts/mutants.sh — mutation testing: does the test suite fail when the
# code it guards is wrong?
#
#   bash scripts/mutants.sh                  # every mutant below, against HEAD
#   bash scripts/mutants.sh --list           # the mutants, one line each
#   bash scripts/mutants.sh --check          # only whether every mutant applies (no build)
#   bash scripts/mutants.sh NAME...          # only these
#   bash scripts/mutants.sh --worktree ...   # against the working tree (uncommitted changes too)
#   bash scripts/mutants.sh --rev REV ...    # against commit REV instead of HEAD
#   bash scripts/mutants.sh --exclude RE ... # leave out the tests matching RE (ctest -E), everywhere:
#                                            # only for a test known to fail on the unmutated tree
#   bash scripts/mutants.sh --jobs N         # build jobs (default 1); CTest always runs -j1
#
# Each mutant is one small source change in important logic (a comparison
# flipped at a boundary, a step dropped, a counter miscounted, a leak). The
# tree under test is copied to build/mutants/src (`git archive HEAD`, or the
# working tree's tracked and unignored files with --worktree); the real
# working tree is never touched. One build directory, build/mutants/build,
# is built incrementally, also across runs (the copy rewrites only files
# whose content changed): per mutant the change is applied, the tree
# rebuilt, the suite run, and the file restored.
#
# A mutant is KILLED when a test fails. One that does not compile, or whose
# target text is not found exactly once (the code moved: the mutant must
# follow it), is an ERROR. The suite runs in two stages: first the tests the
# mutant is aimed at (a -R regex, for speed), then, if they all passed, the
# whole suite with --stop-on-failure; a mutant SURVIVES only if the whole
# suite passes. Before any mutant the unmutated tree must pass the whole
# suite (else every KILLED would mean nothing).
#
# Prints KILLED/SURVIVED/ERROR per mutant and the score (killed / mutants);
# the report is also written to build/mutants/report.txt. Exit status 1 when
# any mutant survived or any was an ERROR. Slow (a relink of every test per
# mutant); not run in CI.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/build/mutants
SRC=$WORK/src
ORIG=$WORK/orig
BUILD=$WORK/build
LOG=$WORK/logs
TEST_TIMEOUT=120 # per test: a mutant that makes a test hang is killed by it

# ---------------------------------------------------------------------------
# How a mutant changes the tree.

# swap FILE OLD NEW: replaces the one occurrence of the literal text OLD in
# FILE (relative to the tree) by NEW; fails when OLD occurs 0 or 2+ times.
swap() {
  if python3 - "$SRC/$1" "$2" "$3" <<'EOF'
import sys
path, old, new = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
n = text.count(old)
if n != 1:
    sys.exit(f"{path}: the target text occurs {n} times, not once:\n{old}")
open(path, "w").write(text.replace(old, new))
EOF
  then
    touched+=("$1")
    echo "$1" >>"$WORK/mutated" # until restored: an interrupted run's next run rebuilds it
  else
    return 1
  fi
}

# ---------------------------------------------------------------------------
# The mutants: NAME;tests aimed at (ctest -R);what is wrong. m_NAME applies it.

MUTANTS=(
  "cuda_probe_fails;^test_cuda_fake;a CUDA build whose backend cannot initialise: fake-driver tests must fail, not skip"
  "replay_leak;^test_soak_smoke$;the replay leaks 256 bytes per event: the soak's flat-RSS check"
  "prometheus_done_word;^test_report_prometheus$;serve-demo no longer prints what test_report_prometheus.sh waits for"
  "frag_utilization_inflated;^test_demo_frag;the frag demo counts the failed request as live: an inflated utilization table"
  "max_split_block_gt;^test_caching;max_split_size: a cached block of exactly max_split_size is no longer oversize (>= becomes >)"
  "max_split_request_le;^test_caching;max_split_size: a request of exactly max_split_size counts as small (< becomes <=)"
  "non_split_rounding_gt;^test_caching;an oversize request may take a block exactly 20 MiB larger (>= becomes >)"
  "split_at_max_split;^test_caching;a request of exactly max_split_size splits its block (< becomes <=)"
  "event_rerecord_stamp;^test_exec_basic$;a re-recorded event's earlier record stamps its time when it completes"
  "round_size_exact;^test_(caching|alloc_config);round_size rounds an exact multiple of 512 up one step"
  "segment_size_10mib;^test_caching;a request of exactly 10 MiB gets a 20 MiB segment, not a 10 MiB one"
  "split_remainder_1mib;^test_caching;a large block is split when exactly 1 MiB would remain"
  "bestfit_skips_exact;^test_caching;best fit skips a cached block of exactly the rounded size"
  "bestfit_high_address;^test_(bins|caching);among equal sizes best fit takes the highest address, not the lowest"
  "merge_next_dropped;^test_caching;a freed block never merges with the free block after it"
  "record_stream_not_deferred;^test_caching;record_stream frees happen before the stream's event completed"
  "oom_no_retry;^test_caching;after flushing the cache on OOM the malloc is not retried"
  "stat_allocated_drops_ones;^test_(caching|report);stat counters miss increments of 1 (allocation counts)"
  "cache_hits_uncounted;^test_(caching|demo);cache hits are not counted"
  "idle_cycles_off_by_one;^test_(caching|demo_emptycache);empty_cache_idle_cycles keeps a segment one call longer"
  "wait_event_ignored;^test_(exec|sorder|demo_streams);a stream's wait on an event another stream recorded orders nothing"
  "legacy_waits_wrong_streams;^test_(exec|demo_streams);the legacy stream waits for non-blocking streams instead of blocking ones"
  "parser_skips_blank_lines;^test_trace;text parsers do not count blank lines in error line numbers"
  "small_split_remainder;^test_caching;a small-pool block is no longer split when exactly 512 bytes would remain"
  "release_available_loop_gt;^test_caching;release_available's largest-first loop skips blocks of exactly max_split_size"
  "oversize_segment_release;^test_caching;releasing a segment of exactly max_split_size leaves oversize_segments counted"
  "small_pool_boundary;^test_caching;a request of exactly 1 MiB goes to the large pool"
  "memory_fraction_boundary;^test_(caching|alloc_config);per_process_memory_fraction refuses a segment that fills the allowed memory exactly"
  "device_limit_boundary;^test_(device|replay);the device's memory limit refuses a malloc that fills it exactly"
)

m_cuda_probe_fails() {
  swap src/device/cuda_device.c '  grt_status st = grt__cu_load(&cu, why, sizeof why);
  if (st) {' '  grt_status st = grt__cu_load(&cu, why, sizeof why);
  if (st || 1) {
    st = st ? st : GRT_ERR_DRIVER;'
}
m_replay_leak() {
  swap src/trace/replay.c '  r->sum.events++;' '  r->sum.events++;
  {
    static void *volatile leak;
    leak = malloc(256);
    if (leak) memset((void *)leak, 0x5a, 256);
  }'
}
m_prometheus_done_word() { swap tools/gpurt/cmd_serve_demo.c 'so.done_word = "day done";' 'so.done_word = "day ended";'; }
m_frag_utilization_inflated() {
  swap tools/gpurt/frag_workloads.c 'res->utilization = (double)live_requested / (double)capacity;' \
    'res->utilization = (double)(live_requested + res->failed_size) / (double)capacity;'
}
m_max_split_block_gt() {
  swap src/alloc/caching.c 'if (size < mss && bsize >= mss) return 1;' 'if (size < mss && bsize > mss) return 1;'
}
m_max_split_request_le() {
  swap src/alloc/caching.c 'if (size < mss && bsize >= mss) return 1;' 'if (size <= mss && bsize >= mss) return 1;'
}
m_non_split_rounding_gt() {
  swap src/alloc/caching.c 'if (size >= mss && bsize - size >= a->cfg.max_non_split_rounding) return 1;' \
    'if (size >= mss && bsize - size > a->cfg.max_non_split_rounding) return 1;'
}
m_split_at_max_split() {
  swap src/alloc/caching.c 'return size < a->cfg.max_split_size && remaining > GRT_SMALL_SIZE;' \
    'return size <= a->cfg.max_split_size && remaining > GRT_SMALL_SIZE;'
}
m_event_rerecord_stamp() { swap src/exec/sched.c 'if (ev->gen == op->u.rec.gen) {' 'if (ev->gen == op->u.rec.gen || 1) {'; }
m_round_size_exact() {
  swap src/alloc/round.c 'return GRT_MIN_BLOCK_SIZE * ((size + GRT_MIN_BLOCK_SIZE - 1) / GRT_MIN_BLOCK_SIZE);' \
    'return GRT_MIN_BLOCK_SIZE * ((size + GRT_MIN_BLOCK_SIZE) / GRT_MIN_BLOCK_SIZE);'
}
m_segment_size_10mib() {
  swap src/alloc/round.c 'if (size < GRT_MIN_LARGE_ALLOC) return GRT_LARGE_BUFFER;' \
    'if (size <= GRT_MIN_LARGE_ALLOC) return GRT_LARGE_BUFFER;'
}
m_split_remainder_1mib() {
  swap src/alloc/caching.c 'return size < a->cfg.max_split_size && remaining > GRT_SMALL_SIZE;' \
    'return size < a->cfg.max_split_size && remaining >= GRT_SMALL_SIZE;'
}
m_bestfit_skips_exact() {
  swap src/alloc/caching.c 'if (!grt__bins_lower_bound(bins, p->size, 0, e)) return NULL;' \
    'if (!grt__bins_lower_bound(bins, p->size + 1, 0, e)) return NULL;'
}
m_bestfit_high_address() {
  swap src/alloc/bins.c 'return (s1 < s2) | ((s1 == s2) & (a1 < a2));' 'return (s1 < s2) | ((s1 == s2) & (a1 > a2));'
}
m_merge_next_dropped() { swap src/alloc/caching_free.c 'cblock *candidates[2] = {b->prev, b->next};' 'cblock *candidates[2] = {b->prev, NULL};'; }
m_record_stream_not_deferred() {
  swap src/alloc/caching_free.c 'if (!is_blocked && query(a, e.event)) {' 'if (!is_blocked) {'
}
m_oom_no_retry() { swap src/alloc/caching.c '      *out = alloc_block(a, p, 1);' '      *out = NULL;'; }
m_stat_allocated_drops_ones() {
  swap src/alloc/allocator_impl.h 's->allocated += amount > 0 ? amount : 0;' 's->allocated += amount > 1 ? amount : 0;'
}
m_cache_hits_uncounted() { swap src/alloc/caching.c '    a->stats.num_cache_hits++;' '    (void)0;'; }
m_idle_cycles_off_by_one() {
  swap src/alloc/caching_free.c 'if (pool->cycle - b->idle_since < min_idle ||' 'if (pool->cycle - b->idle_since <= min_idle ||'
}
m_wait_event_ignored() {
  swap src/exec/stream.c 'else if (ev->stream && ev->stream != s && grt__done(ev->stream) < ev->seq) {' \
    'else if (ev->stream && ev->stream != s && grt__done(ev->stream) < ev->seq && 0) {'
}
m_legacy_waits_wrong_streams() {
  swap src/exec/op.c 'if (t == leg || (t->flags & GRT_STREAM_NON_BLOCKING) ||' 'if (t == leg || !(t->flags & GRT_STREAM_NON_BLOCKING) ||'
}
m_parser_skips_blank_lines() { swap src/trace/text.c '  it->lineno++;' '  if (n) it->lineno++;'; }
m_small_split_remainder() {
  swap src/alloc/caching.c 'return remaining >= GRT_MIN_BLOCK_SIZE;' 'return remaining > GRT_MIN_BLOCK_SIZE;'
}
m_release_available_loop_gt() {
  swap src/alloc/caching_free.c 'while (more && released < key && e.size >= mss && !st) {' \
    'while (more && released < key && e.size > mss && !st) {'
}
m_oversize_segment_release() {
  swap src/alloc/caching_free.c 'if (s->size >= a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_segments, -1);' \
    'if (s->size > a->cfg.max_split_size) grt__stat_update(&a->stats.oversize_segments, -1);'
}
m_small_pool_boundary() {
  swap src/alloc/caching.h 'return size <= GRT_SMALL_SIZE ? &c->small : &c->large;' 'return size < GRT_SMALL_SIZE ? &c->small : &c->large;'
}
m_memory_fraction_boundary() {
  swap src/alloc/caching.c 'c->total_allocated_memory + size > c->allowed_memory' 'c->total_allocated_memory + size >= c->allowed_memory'
}
m_device_limit_boundary() { swap src/device/device.c 'if (need <= room) return 0;' 'if (need < room) return 0;'; }

# ---------------------------------------------------------------------------

usage() { sed -n '2,/^# Each mutant/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

# The whole run is one function, parsed before it starts: editing this file
# while a run is going does not change the run.
main() {
  from=head rev=HEAD jobs=1 list=0 check=0 exclude=()
  selected=()
  while [ $# -gt 0 ]; do
    case $1 in
      --worktree) from=worktree ;;
      --rev) rev=${2:?--rev REV}; shift ;;
      --exclude) exclude=(-E "${2:?--exclude REGEX}"); shift ;;
      --list) list=1 ;;
      --check) check=1 ;;
      --jobs) jobs=${2:?--jobs N}; shift ;;
      -h | --help) usage; exit 0 ;;
      -*) echo "mutants.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
      *) selected+=("$1") ;;
    esac
    shift
  done
  if [ $list = 1 ]; then
    for m in "${MUTANTS[@]}"; do IFS=';' read -r name _ what <<<"$m"; printf '%-28s %s\n' "$name" "$what"; done
    exit 0
  fi
  for s in "${selected[@]}"; do
    printf '%s\n' "${MUTANTS[@]}" | grep -q "^$s;" || { echo "mutants.sh: no mutant '$s' (see --list)" >&2; exit 2; }
  done

  # --- the tree under test ---
  rm -rf "$ORIG" "$LOG"
  mkdir -p "$ORIG" "$LOG" "$SRC"
  if [ $from = head ]; then
    git -C "$ROOT" archive "$rev" | tar -x -C "$ORIG"
    echo "mutants: tree of $(git -C "$ROOT" rev-parse --short "$rev")"
  else
    (cd "$ROOT" && git ls-files -z -co --exclude-standard | tar --null -T - -cf -) | tar -x -C "$ORIG"
    echo "mutants: the working tree (HEAD $(git -C "$ROOT" rev-parse --short HEAD) + its changes)"
  fi
  # SRC := ORIG, copying only the files whose content differs: they get a new
  # mtime and are rebuilt, the others keep theirs (a mutated file left behind
  # by an interrupted run is restored and rebuilt too).
  (cd "$ORIG" && find . -type f) | while IFS= read -r f; do
    cmp -s "$ORIG/$f" "$SRC/$f" || { mkdir -p "$(dirname "$SRC/$f")" && cp "$ORIG/$f" "$SRC/$f"; }
  done
  (cd "$SRC" && find . -type f) | while IFS= read -r f; do [ -e "$ORIG/$f" ] || rm -f "$SRC/$f"; done
  # a file a mutant changed when a run was interrupted: restored above if its
  # content differed, but its object may be newer than the restored copy
  if [ -f "$WORK/mutated" ]; then
    while IFS= read -r f; do [ -f "$ORIG/$f" ] && cp "$ORIG/$f" "$SRC/$f"; done <"$WORK/mutated"
    rm -f "$WORK/mutated"
  fi
  # tests find the shared data at the source tree's ../shared, as in the real tree
  if [ -d "$ROOT/../shared" ] && [ ! -e "$WORK/shared" ]; then ln -s "$(cd "$ROOT/../shared" && pwd)" "$WORK/shared"; fi

  if [ $check = 1 ]; then
    bad=0
    for m in "${MUTANTS[@]}"; do
      IFS=';' read -r name _ _ <<<"$m"
      touched=()
      if m_"$name" >"$LOG/$name-apply.txt" 2>&1; then echo "applies   $name"; else echo "ERROR     $name: $(cat "$LOG/$name-apply.txt")"; bad=1; fi
      for f in "${touched[@]}"; do cp "$ORIG/$f" "$SRC/$f"; done
      rm -f "$WORK/mutated"
    done
    exit $bad
  fi

  build() { nice cmake --build "$BUILD" -j "$jobs" >"$1" 2>&1; }
  # suite LOGFILE [CTEST ARGS...]: 0 when every selected test passed or skipped
  suite() {
    local out=$1
    shift
    nice ctest --test-dir "$BUILD" -j1 --timeout $TEST_TIMEOUT --output-on-failure --no-tests=error ${exclude[@]+"${exclude[@]}"} "$@" >"$out" 2>&1
  }
  failed_tests() { sed -n '/The following tests FAILED/,$p' "$1" | grep -Eo 'test_[A-Za-z0-9_]+' | sort -u | tr '\n' ' '; }

  cmake -S "$SRC" -B "$BUILD" -G Ninja >"$LOG/configure.txt" 2>&1 || { cat "$LOG/configure.txt"; exit 1; }
  echo "mutants: building the unmutated tree"
  build "$LOG/baseline-build.txt" || { tail -30 "$LOG/baseline-build.txt"; echo "mutants: the unmutated tree does not build"; exit 1; }
  echo "mutants: the whole suite on the unmutated tree"
  if ! suite "$LOG/baseline-tests.txt"; then
    echo "mutants: the unmutated tree fails: $(failed_tests "$LOG/baseline-tests.txt")(see $LOG/baseline-tests.txt)"
    exit 1
  fi

  killed=0 survived=0 errors=0 total=0
  report=()
  for m in "${MUTANTS[@]}"; do
    IFS=';' read -r name regex what <<<"$m"
    if [ ${#selected[@]} -gt 0 ] && ! printf '%s\n' "${selected[@]}" | grep -qx "$name"; then continue; fi
    total=$((total + 1))
    touched=()
    verdict="" detail=""
    start=$SECONDS
    if ! m_"$name" >"$LOG/$name-apply.txt" 2>&1; then
      verdict=ERROR detail="does not apply: $(tail -3 "$LOG/$name-apply.txt" | tr '\n' ' ')"
    fi
    if [ -z "$verdict" ] && ! build "$LOG/$name-build.txt"; then
      verdict=ERROR detail="does not build (see $LOG/$name-build.txt)"
    fi
    if [ -z "$verdict" ]; then
      if suite "$LOG/$name-aimed.txt" -R "$regex"; then aimed=0; else aimed=1; fi
      if grep -q "No tests were found" "$LOG/$name-aimed.txt"; then
        verdict=ERROR detail="no test matches the aimed regex $regex"
      elif [ $aimed = 1 ]; then
        verdict=KILLED detail="by $(failed_tests "$LOG/$name-aimed.txt")"
      elif ! suite "$LOG/$name-full.txt" --stop-on-failure; then
        verdict=KILLED detail="by $(failed_tests "$LOG/$name-full.txt")(not among the aimed tests $regex)"
      else
        verdict=SURVIVED detail="the whole suite passed"
      fi
    fi
    for f in "${touched[@]}"; do cp "$ORIG/$f" "$SRC/$f"; done # a fresh mtime: rebuilt next time
    rm -f "$WORK/mutated"
    case $verdict in KILLED) killed=$((killed + 1)) ;; SURVIVED) survived=$((survived + 1)) ;; *) errors=$((errors + 1)) ;; esac
    line=$(printf '%-9s %-28s %s — %s (%ds)' "$verdict" "$name" "$what" "$detail" $((SECONDS - start)))
    echo "$line"
    report+=("$line")
  done
  # leave the build on the unmutated tree
  build "$LOG/final-build.txt" || true

  {
    printf '%s\n' "${report[@]}"
    echo "score: $killed/$total killed, $survived survived, $errors errors"
  } >"$WORK/report.txt"
  echo "score: $killed/$total killed, $survived survived, $errors errors (report: $WORK/report.txt)"
  [ $survived -eq 0 ] && [ $errors -eq 0 ]
}

main "$@"; exit
