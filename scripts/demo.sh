#!/usr/bin/env bash
# The main job: install what is missing, build (Release), run every demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRT_BUILD_TESTS=OFF >/dev/null
cmake --build build/release
./build/release/tools/gpurt demo all
