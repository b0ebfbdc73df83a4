#!/usr/bin/env bash
# Installs the Debian packages gpurt needs, only those missing. Run as root
# (or with sudo available). Extra package names may be passed as arguments.
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libcmocka-dev chromium "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "deps: installing ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
