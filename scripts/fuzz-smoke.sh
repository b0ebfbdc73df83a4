#!/usr/bin/env bash
# CI's fuzzing step: every libFuzzer harness for a short while (default 15 s
# each) on its saved corpus in fuzz/corpus/<harness>/; fails on any crash,
# leak, sanitizer report or broken invariant. See scripts/fuzz.sh.
#   scripts/fuzz-smoke.sh [seconds]
exec bash "$(dirname "$0")/fuzz.sh" --smoke "${1:-15}"
