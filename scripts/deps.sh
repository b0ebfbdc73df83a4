#!/usr/bin/env bash
# Installs the Debian packages gpurt needs, only those missing. Run as root
# (or with sudo available). Extra package names may be passed as arguments.
# Optional packages (the /metrics server, JSON read-back in tests, Prometheus
# for the scrape test) are tried separately: when they cannot be installed the
# build leaves those parts out and their tests skip with a message. Debian's
# Python with setuptools, wheel, pip, venv and pytest builds and tests the Python
# package (python/).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libcmocka-dev libjansson-dev liburing-dev zlib1g-dev libzstd-dev zstd curl jq
  python3-dev python3-setuptools python3-wheel python3-pip python3-venv python3-pytest "$@")
optional=(libmicrohttpd-dev prometheus chromium)

missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${pkgs[@]}")
mapfile -t missing_opt < <(missing_of "${optional[@]}")
[ ${#missing[@]} -eq 0 ] && [ ${#missing_opt[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || [ ${#missing[@]} -eq 0 ]
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for p in "${missing_opt[@]}"; do
  echo "deps: installing optional $p" >&2
  $SUDO apt-get install -y -qq --no-install-recommends "$p" >/dev/null 2>&1 ||
    echo "deps: could not install optional package $p; the parts needing it are skipped" >&2
done
