#!/bin/sh
# Prints, one per line, the Debian packages that hold the shared libraries
# the given binaries load (as resolved by ldd here). The Dockerfile's build
# stage runs it so that the runtime stage installs exactly those packages:
# no hand-kept list that drifts from what the binaries link.
#
#   docker/runtime-packages.sh build/bin/pstrain build/bin/pstrain_worker ...
#
# RUNTIME_PACKAGES_PROVIDED=DIR[:DIR...]: libraries under these folders come
# from elsewhere (tests/docker mounts the CUDA toolkit's lib folder into its
# containers) and are left out instead of failing for want of a package.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

libs=$(ldd "$@" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' | sort -u)
missing=$(ldd "$@" | grep 'not found' || true)
if [ -n "$missing" ]; then
  echo "runtime-packages: unresolved libraries:" >&2
  echo "$missing" >&2
  exit 1
fi
provided=${RUNTIME_PACKAGES_PROVIDED:-}
is_provided() {
  old_ifs=$IFS; IFS=:
  for dir in $provided; do
    case "$1" in "${dir%/}"/*) IFS=$old_ifs; return 0 ;; esac
  done
  IFS=$old_ifs
  return 1
}
# Collected first and printed at the end: a failure inside a pipeline would
# be lost (sh has no pipefail) and leave a partial list.
pkgs=""
for lib in $libs; do
  is_provided "$lib" && continue
  # With merged /usr a library found as /lib/... is registered as /usr/lib/...
  # (or the other way round): look it up by every name it has.
  real=$(readlink -f "$lib")
  pkg=""
  for name in "$lib" "$real" "/usr$lib" "/usr$real" "${lib#/usr}" "${real#/usr}"; do
    pkg=$(dpkg-query -S "$name" 2>/dev/null | grep -v '^diversion' | head -n1 | sed 's/: .*//') || true
    [ -n "$pkg" ] && break
  done
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package holds $lib" >&2
    exit 1
  fi
  pkgs="$pkgs $pkg"
done
for pkg in $pkgs; do echo "$pkg"; done | sort -u
