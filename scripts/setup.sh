#!/usr/bin/env bash
# Installs the Debian 12 packages tritium needs to build and test. Run as root (or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(build-essential cmake ninja-build ccache pkg-config python3
      nlohmann-json3-dev libboost-dev libcpp-httplib-dev libpcre2-dev libicu-dev libcli11-dev libfmt-dev libspdlog-dev
      libgtest-dev libgmock-dev libbenchmark-dev libssl-dev zlib1g-dev
      gnuplot-nox valgrind
      clang-14 libfuzzer-14-dev  # scripts/fuzz.sh (libFuzzer targets)
      libopenmpi-dev openmpi-bin)
# Node.js + npm drive the OpenAI-client tests; machines that already have them (from any source) keep theirs.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then PKGS+=(nodejs npm); fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
