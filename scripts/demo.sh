#!/usr/bin/env bash
# The main job: install what is missing, build (Release), run every demo, and
# install the Python package for python3 (libgpurt installed under
# build/release/prefix, the package built against it: docs/PYTHON.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRT_BUILD_TESTS=OFF >/dev/null
cmake --build build/release
./build/release/tools/gpurt demo all
cmake --install build/release --prefix build/release/prefix >/dev/null
py=$(bash scripts/python.sh build/release/prefix | tail -1)
"$py" -c 'import gpurt; print(f"python: gpurt {gpurt.__version__} installed for", __import__("sys").executable)'
