#!/usr/bin/env bash
# Installs, only when missing, the Debian packages pstrain needs to build,
# test, benchmark and run its demo. Safe to run repeatedly; a no-op when
# everything is present. Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libzmq3-dev cppzmq-dev libcereal-dev libabsl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev
  libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgloo-dev libcpp-httplib-dev zlib1g-dev libzstd-dev librocksdb-dev
  libsnappy-dev liblz4-dev libbrotli-dev
  iproute2 procps python3 python3-yaml curl
  libcairo2-dev fonts-dejavu-core
)
# Optional extras, pulled in by tests that need them (fuzzing, compose
# validation and the real compose stack, browser tests). Installed when
# PSTRAIN_FULL_DEPS=1 or in CI. docker.io is Debian's engine (the tests start
# their own dockerd on a private socket); debootstrap makes their base image.
EXTRA_PACKAGES=(clang libclang-rt-14-dev docker-compose docker.io debootstrap
                chromium chromium-driver)

missing=()
# Node.js + npm are needed only for the browser test's driver; a machine may
# already carry a newer Node than Debian's (whose npm package conflicts with
# it), so Debian's is installed only when no npm is present at all.
if [[ "${PSTRAIN_FULL_DEPS:-0}" == 1 || "${CI:-}" == true ]] && ! command -v npm >/dev/null; then
  EXTRA_PACKAGES+=(nodejs npm)
fi
want=("${PACKAGES[@]}")
if [[ "${PSTRAIN_FULL_DEPS:-0}" == 1 || "${CI:-}" == true ]]; then
  want+=("${EXTRA_PACKAGES[@]}")
fi
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them or rerun as root" >&2
    exit 1
  fi
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Installed, not started: the tests run their own dockerd on a private
# socket, and a system one would add a bridge and firewall rules.
policy=/usr/sbin/policy-rc.d
temp_policy=0
if [[ " ${missing[*]} " == *" docker.io "* && ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod +x "$policy"
  temp_policy=1
fi
status=0
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" || status=$?
if ((temp_policy)); then $SUDO rm -f "$policy"; fi
exit $status
