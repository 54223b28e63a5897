#!/usr/bin/env bash
# Builds what bench/device/run.sh needs on the GPU machine and packs it into .device/payload.tar.xz (git-ignored):
# bin/tritium and bin/tritium_tests built here for sm_90 (stripped), lib/ the shared libraries they need that the
# device image lacks (the Debian ones: fmt, ICU, PCRE2, Open MPI, ...; CUDA's own libraries are on the device),
# shared/ the test data the CUDA tests read (tiny-qwen2, the goldens, WikiText-2, the books). With BASE_BUILD set to
# another CUDA build folder (the code before a change), its tritium goes in as bin/tritium-base: run.sh then measures
# e2e and serve for both in one run. SLIM=1 leaves out WikiText-2 and the books.
# Usage, from the repository root: [BUILD_DIR=DIR] [BASE_BUILD=DIR] [SLIM=1] bench/device/pack.sh   (then call the device
# with carry [".device"])
set -euo pipefail
cd "$(dirname "$0")/../.."
SHARED=${TRITIUM_TEST_DATA:-$(cd .. && pwd)/shared}
B=${BUILD_DIR:-build-cuda}  # BUILD_DIR: an existing CUDA build folder (e.g. scripts/test.sh's build) instead
if [ -z "${BUILD_DIR:-}" ]; then
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRITIUM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DTRITIUM_BUILD_BENCH=OFF >/dev/null
fi
cmake --build "$B" -j "${JOBS:-$(nproc)}" --target tritium tritium_tests
P=$(mktemp -d)
mkdir -p "$P/bin" "$P/lib" "$P/shared/models" "$P/shared/data"
cp "$B/tritium" "$B/tritium_tests" "$P/bin/"
if [ -n "${BASE_BUILD:-}" ]; then cp "$BASE_BUILD/tritium" "$P/bin/tritium-base"; fi
strip "$P/bin/"*
# Every non-system, non-CUDA library the binaries load.
ldd "$B/tritium" "$B/tritium_tests" | awk '/=> \//{print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so|/usr/local/cuda|libcuda\.so' |
  while read -r l; do cp -L "$l" "$P/lib/"; done
cp -r "$SHARED/models/tiny-qwen2" "$P/shared/models/"
cp -r "$SHARED/golden" "$P/shared/"
mkdir -p "$P/shared/tokenizers" && cp -r "$SHARED/tokenizers/qwen3" "$P/shared/tokenizers/"  # synth --shape qwen3-*
if [ -z "${SLIM:-}" ]; then  # SLIM=1: no evaluation texts (the payload then fits beside the checkout's 64 MiB)
  mkdir -p "$P/shared/data/wikitext-2-raw" && cp "$SHARED/data/wikitext-2-raw/wiki.test.raw" "$P/shared/data/wikitext-2-raw/"
  cp -r "$SHARED/data/books-eval" "$P/shared/data/"
fi
mkdir -p .device && XZ_OPT=-9 tar -C "$P" -cJf .device/payload.tar.xz . && rm -rf "$P"
ls -la .device/payload.tar.xz
