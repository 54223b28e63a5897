#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cpp) with clang in build-fuzz/ and runs each for N seconds
# (default 60) from its seed corpus tests/fuzz/<name>/. New inputs go to build-fuzz/corpus/<name>/, crashes to
# build-fuzz/artifacts/ (exit status non-zero). Usage: scripts/fuzz.sh [SECONDS]; CXX (default clang++-14),
# JOBS (default all cores) and FUZZ_SEED (libFuzzer's -seed; default 0 = a random seed per run) may be set.
# scripts/test.sh fixes the seed so that CI replays the same mutations on every commit: a CI failure is then caused
# by the change under test, and can be reproduced locally from a fresh corpus with the same seed.
set -euo pipefail
SECS=${1:-60}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${TRITIUM_FUZZ_BUILD:-$ROOT/build-fuzz}
CXX_BIN=${CXX:-clang++-14}
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
  -DTRITIUM_FUZZ=ON -DTRITIUM_CUDA=OFF -DTRITIUM_MPI=OFF -DTRITIUM_BUILD_TESTS=OFF -DTRITIUM_BUILD_BENCH=OFF >/dev/null
targets=()
for src in "$ROOT"/tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$src" .cpp)"); done
cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
mkdir -p "$BUILD/artifacts"
# The targets run side by side, JOBS at a time (default: all cores); each one's log is printed when it ends.
run_one() {
  local t=$1 name=${1#fuzz_}
  mkdir -p "$BUILD/corpus/$name"
  if "$BUILD/$t" -max_total_time="$SECS" -max_len=65536 -rss_limit_mb=2048 -timeout=10 -seed="${FUZZ_SEED:-0}" \
      -artifact_prefix="$BUILD/artifacts/$name-" "$BUILD/corpus/$name" "$ROOT/tests/fuzz/$name" > "$BUILD/$t.log" 2>&1; then
    echo "fuzz: $t for ${SECS} s: $(grep -E '^Done' "$BUILD/$t.log" | tail -1)"
  else
    echo "fuzz: $t FAILED (log below; the input is in $BUILD/artifacts/)"
    tail -60 "$BUILD/$t.log"
    return 1
  fi
}
fails=0
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-$(nproc)}" ]; do wait -n || fails=$((fails + 1)); done
  run_one "$t" &
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do wait -n || fails=$((fails + 1)); done
[ "$fails" -eq 0 ] || { echo "fuzz: $fails target(s) failed"; exit 1; }
