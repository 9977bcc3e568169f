#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh --prebuilt needs, for a GPU machine that
# cannot build pstrain itself (no Debian packages there): the check's
# binaries from a CUDA build tree (stripped) and the shared libraries they
# load that are neither the C library nor CUDA's (cudart, cuBLAS and NCCL
# come from the GPU machine's toolkit), as a .tar.gz.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: scripts/gpu-bundle.sh [--build-dir DIR] [--out FILE.tar.gz]

Builds the GPU check's targets in --build-dir (default: build; configured
with CUDA for Ampere and Hopper, 80 and 90, unless configured otherwise)
and writes FILE (default: .gpu-bundle.tar.gz, ignored by git): bin/ (the
binaries), lib/ (their shared libraries but libc's, libstdc++'s and
CUDA's), manifest.txt (commit, CUDA architectures, date). Then, on the GPU
machine: scripts/gpu-check.sh --prebuilt FILE --out DIR.
EOF
}

BUILD_DIR=build
OUT_FILE=.gpu-bundle.tar.gz
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) usage; exit 0 ;;
    --build-dir) BUILD_DIR="${2:?--build-dir needs a value}"; shift 2 ;;
    --build-dir=*) BUILD_DIR="${1#*=}"; shift ;;
    --out) OUT_FILE="${2:?--out needs a value}"; shift 2 ;;
    --out=*) OUT_FILE="${1#*=}"; shift ;;
    *) echo "gpu-bundle: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
SRC="$(cd "$(dirname "$0")/.." && pwd)"
TARGETS="gpu_tests pstrain pstrain_bench pstrain_coordinator pstrain_server pstrain_worker"
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$SRC" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPSTRAIN_CUDA=ON
fi
grep -q '^CUDA_CUDART:FILEPATH=/' "$BUILD_DIR/CMakeCache.txt" ||
  { echo "gpu-bundle: $BUILD_DIR is not a CUDA build" >&2; exit 1; }
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j "$(nproc)" --target $TARGETS

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/bin" "$STAGE/lib"
for t in $TARGETS; do
  cp "$BUILD_DIR/bin/$t" "$STAGE/bin/"
  strip --strip-unneeded "$STAGE/bin/$t"
done
# Every shared library the binaries load, but the C runtime's and CUDA's.
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libresolv\.|libanl\.|libutil\.|libnsl\.|libstdc\+\+|libgcc_s|libcuda\.|libcudart|libcublas|libnccl)'
for t in $TARGETS; do
  ldd "$BUILD_DIR/bin/$t" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
  if ! [[ "$name" =~ $skip ]]; then cp -L "$path" "$STAGE/lib/$name"; fi
done
strip --strip-unneeded "$STAGE"/lib/* 2>/dev/null || true
{
  echo "commit $(git -C "$SRC" rev-parse HEAD 2>/dev/null || echo unknown)"
  arch="$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$BUILD_DIR/CMakeCache.txt")"
  echo "cuda_architectures ${arch:-80 90, the default of cmake/cuda.cmake}"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
} > "$STAGE/manifest.txt"
tar -czf "$OUT_FILE" -C "$STAGE" bin lib manifest.txt
echo "gpu-bundle: wrote $OUT_FILE ($(du -h "$OUT_FILE" | cut -f1)): $(ls "$STAGE/bin" | wc -l) binaries, $(ls "$STAGE/lib" | wc -l) libraries"
