#!/usr/bin/env bash
# test_python.sh — the Python package as a user gets it: libgpurt installed
# into a prefix, `pip install --no-build-isolation --target` of python/ built
# against it (offline), pytest over python/tests with the gpurt command beside
# it to compare figures, and a plain `pip install` into a virtual environment.
#   test_python.sh PATH/TO/gpurt      (in BUILD/tools/)
set -euo pipefail
build=$(cd "$(dirname "${1:?usage: test_python.sh PATH/TO/gpurt}")/.." && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
if grep -qE '^GRT_SANITIZE:STRING=.+|^CMAKE_C_FLAGS:STRING=.*--coverage' "$build/CMakeCache.txt"; then
  echo "SKIPPED: the Python package is tested in the plain build (sanitizer and coverage objects need their runtime inside the interpreter)"
  exit 77
fi
work="$build/python-test"
rm -rf "$work" && mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
echo "installed libgpurt into $work/prefix"
# the interpreter with pytest: $GRT_PYTHON, else Debian's (scripts/deps.sh installs python3-pytest), else python3
py=""
for cand in ${GRT_PYTHON:-} /usr/bin/python3 "$(command -v python3 || true)"; do
  [ -n "$cand" ] && [ -x "$cand" ] && "$cand" -c 'import pytest' 2>/dev/null && { py=$cand; break; }
done
[ -n "$py" ] || { echo "FAIL: no interpreter has pytest (Debian: python3-pytest; scripts/deps.sh installs it)"; exit 1; }
GRT_PYTHON="$py" bash "$src/scripts/python.sh" "$work/prefix" --target "$work/site" >/dev/null
echo "built and installed the package with $py into $work/site"
# the package must not need the build tree: run from an empty folder
cd "$work"
export GPURT_CLI="$build/tools/gpurt" PYTHONPATH="$work/site:$src/python/tests" PYTHONDONTWRITEBYTECODE=1
"$py" -m pytest -q -p no:cacheprovider "$src/python/tests" 
# the plain install (no --target) into a virtual environment that sees the system's setuptools
"$py" -m venv --system-site-packages "$work/venv"
GRT_PYTHON="$work/venv/bin/python" bash "$src/scripts/python.sh" "$work/prefix" >/dev/null
env -u PYTHONPATH "$work/venv/bin/python" -c 'import gpurt; assert gpurt.load(b"\x80\x04}\x94.").info["events"] == 0; print("ok: pip install into a venv:", gpurt.__file__)'
