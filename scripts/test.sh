#!/usr/bin/env bash
# Builds tritium twice (Release, then ASan+UBSan) and runs the whole test suite in each, then runs every libFuzzer
# target (tests/fuzz) for FUZZ_SECONDS (default 60) each, from the fixed libFuzzer seed FUZZ_SEED (default 1).
# Usage: scripts/test.sh            (TRITIUM_TEST_DATA defaults to ../shared beside the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
# Reuse compiled objects across checkouts in different folders (CI clones into a new one each time).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)} CCACHE_NOHASHDIR=1
export TRITIUM_TEST_DATA=${TRITIUM_TEST_DATA:-$(cd .. && pwd)/shared}
# The CUDA backend is compiled (sm_90 only) when nvcc is present; its tests skip without a GPU.
if [ -z "${TRITIUM_CUDA:-}" ]; then
  if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then TRITIUM_CUDA=ON; else TRITIUM_CUDA=OFF; fi
fi
CUDA_FLAG=$TRITIUM_CUDA

echo "== Release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRITIUM_CUDA="$CUDA_FLAG" -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
cmake --build build -j "$JOBS"
(cd build && ctest --output-on-failure -j 2 --timeout 900)

echo "== ASan + UBSan build"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTRITIUM_SANITIZE=ON \
  -DTRITIUM_CUDA=OFF -DTRITIUM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$JOBS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j 2 --timeout 1800)

echo "== Fuzzing (libFuzzer, ${FUZZ_SECONDS:-60} s per target, seed ${FUZZ_SEED:-1})"
FUZZ_SEED=${FUZZ_SEED:-1} bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
