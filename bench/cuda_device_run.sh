#!/bin/bash
# How the CUDA results were produced on the device machine (bench/RESULTS.md, "CUDA (H200)"). Here: build with
# cmake -S . -B build-cuda -G Ninja -DTRITIUM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, then pack bin/{tritium,tritium_tests},
# lib/ (libfmt.so.9 libpcre2-8.so.0 libicuuc.so.72 libicudata.so.72 libgomp.so.1) and shared/ (tiny-qwen2, goldens,
# wiki.test.raw, 2852-0.txt) into payload.tar.xz next to this script in a carried, git-ignored folder of the checkout.
cd "$(dirname "$0")"
tar -xJf payload.tar.xz
R=$(cd ../.. && pwd)
mkdir -p /work/wt-cuda/tests && ln -sfn "$R/models" /work/wt-cuda/models && ln -sfn "$R/tests/data" /work/wt-cuda/tests/data
export LD_LIBRARY_PATH=$PWD/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$PWD/shared
date -u
timeout 100 bin/tritium_tests --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; echo "tests rc=$?"
grep -E "^\[  |prompt|greedy|ppl|Failure|Which" $OUT/tests.log | grep -v "RUN\|^\[       OK" | head -40
(timeout 60 bin/tritium synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?"
 timeout 100 bin/tritium cuda-bench -m /tmp/syn2b --batch 1,16 --prompt 32 --gen 32 -r 2 > $OUT/e2e.md 2>&1; echo "e2e rc=$?"; cat $OUT/e2e.md) &
wait
PYTHONUNBUFFERED=1 timeout 70 python3 bench/hf_decode.py /tmp/syn2b 16 1,16 > $OUT/hf.log 2>&1; echo "hf rc=$?"; grep "|\|transformers\|Error" $OUT/hf.log | tail -4
timeout 50 compute-sanitizer --tool memcheck bin/tritium_tests --gtest_filter='CudaKernels.*' > $OUT/memcheck.log 2>&1; echo "memcheck rc=$?"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5
