#!/usr/bin/env bash
# Runs README command 1 (setup, the Release build of `build`, a generation) and the whole test suite in it, builds
# again with ASan+UBSan (CPU only) and runs the suite there, then runs every libFuzzer
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

# README command 1, as a newcomer types it (tools/readme_command.py reads it from README.md): setup, configure with
# the default options (the CUDA backend for every default architecture when nvcc is found), build, generate.
echo "== README command 1: $(python3 tools/readme_command.py 1)"
CMAKE_BUILD_PARALLEL_LEVEL=$JOBS bash -c "$(python3 tools/readme_command.py 1)"
(cd build && ctest --output-on-failure -j 2 --timeout 900)

echo "== ASan + UBSan build"
# -O1 and line tables only (what the sanitizers' reports need) compile in about 40% of -O2 -g's time.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DTRITIUM_SANITIZE=ON -DTRITIUM_CUDA=OFF -DTRITIUM_BUILD_BENCH=OFF >/dev/null
cmake --build build-asan -j "$JOBS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-asan && ctest --output-on-failure -j 2 --timeout 1800)

echo "== Fuzzing (libFuzzer, ${FUZZ_SECONDS:-60} s per target, seed ${FUZZ_SEED:-1})"
FUZZ_SEED=${FUZZ_SEED:-1} bash scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
