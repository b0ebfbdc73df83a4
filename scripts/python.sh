#!/usr/bin/env bash
# Installs the Python package (python/) for an interpreter, offline, against
# a libgpurt installed under a prefix:
#   scripts/python.sh PREFIX [--target DIR]   PREFIX: a `cmake --install --prefix` folder
# The interpreter is $GRT_PYTHON, else python3 on PATH when it can build an
# extension (setuptools, wheel and Python.h), else Debian's /usr/bin/python3. An
# interpreter whose packages the system manages (PEP 668) installs with
# --break-system-packages into its local site folder. Prints the interpreter used
# on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(cd "${1:?usage: scripts/python.sh PREFIX [--target DIR]}" && pwd)
shift
# Debian's wheel (pure Python) lends itself to an interpreter that lacks it:
# setuptools before 70.1 builds wheels through it, and no registry is reached.
borrow=""
if [ -d /usr/lib/python3/dist-packages/wheel ]; then
  borrow=$(mktemp -d)
  trap 'rm -rf "$borrow"' EXIT
  for d in /usr/lib/python3/dist-packages/wheel /usr/lib/python3/dist-packages/wheel-*-info; do
    [ -e "$d" ] && ln -s "$d" "$borrow/" # the package and its metadata (bdist_wheel's entry point)
  done
fi
can_build() {
  PYTHONPATH="$borrow${PYTHONPATH:+:$PYTHONPATH}" "$1" - <<'PY' 2>/dev/null
import os, sysconfig, setuptools
try:
    import wheel  # noqa: F401  (setuptools before 70.1 builds wheels through it)
except ImportError:
    if tuple(int(x) for x in setuptools.__version__.split(".")[:2]) < (70, 1):
        raise SystemExit(1)
raise SystemExit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
}
py=${GRT_PYTHON:-}
if [ -z "$py" ]; then
  py=/usr/bin/python3
  command -v python3 >/dev/null && can_build "$(command -v python3)" && py=$(command -v python3)
fi
can_build "$py" || { echo "python.sh: $py cannot build an extension (needs setuptools, wheel and Python.h)" >&2; exit 1; }
extra=()
if [ $# -eq 0 ] && "$py" -c 'import os,sys,sysconfig; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
  extra=(--break-system-packages)
fi
PYTHONPATH="$borrow${PYTHONPATH:+:$PYTHONPATH}" \
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" GPURT_PREFIX="$prefix" \
  "$py" -m pip install --quiet --no-build-isolation --no-index --no-deps --disable-pip-version-check \
  --root-user-action=ignore "${extra[@]}" "$@" ./python >&2
echo "$py"
