#!/bin/bash
# How the "Update: decode at batch 1" figures of bench/RESULTS.md ("CUDA (H200)") were produced on the device:
# CUDA tests, the batch-1/4 kernel table, end-to-end decode of the synthetic 2B4T (PDL on, off, 1K context),
# compute-sanitizer memcheck. Run from the repository root with .device/decode carried, holding payload.tar.xz:
# bin/{tritium,tritium_tests} (stripped, built with cmake -S . -B build-cuda -G Ninja -DTRITIUM_CUDA=ON
# -DCMAKE_CUDA_ARCHITECTURES=90 -DTRITIUM_BUILD_BENCH=OFF), lib/ (their non-system .so files), shared/
# (models/tiny-qwen2, golden/tiny-*, data/wikitext-2-raw/wiki.test.raw, data/books-eval/2852-0.txt). ~75 s.
R=$(pwd); D=$R/.device/decode; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s)
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
mkdir -p /work/wt-decode/tests && ln -sfn $R/models /work/wt-decode/models && ln -sfn $R/tests/data /work/wt-decode/tests/data
TR=$D/bin/tritium
nvidia-smi -L | tee -a $S; date -u | tee -a $S
ldd $TR | grep "not found" | tee -a $S
(timeout 80 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 100 $D/bin/tritium_tests --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "tests rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Which is|Expected|prompt 0|greedy|ppl" $OUT/tests.log | head -30 | tee -a $S
timeout 60 $TR cuda-bench --kernels --kernel-batches ${KB:-1,4} > $OUT/kernels.md 2>&1; say "kernels rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "copy bandwidth|^\| (o|qkv|gate_up|down) .*\| 1 \||RMSNorm|GLU|attention" $OUT/kernels.md | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
timeout 75 $TR cuda-bench -m /tmp/syn2b --batch 1,16 --prompt 32 --gen 32 -r 2 > $OUT/e2e.md 2>&1; say "e2e rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "weights read|^\| [0-9]" $OUT/e2e.md | tee -a $S; tail -2 $OUT/e2e.md | grep -i error | tee -a $S
timeout 50 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 32 --gen 32 -r 2 --no-pdl > $OUT/e2e_nopdl.md 2>&1; say "e2e no-pdl rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\| [0-9]" $OUT/e2e_nopdl.md | tee -a $S
timeout 45 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e_ctx1k.md 2>&1; say "e2e ctx1k rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\| [0-9]" $OUT/e2e_ctx1k.md | tee -a $S
timeout 60 compute-sanitizer --tool memcheck $D/bin/tritium_tests --gtest_filter='CudaKernels.*' > $OUT/memcheck.log 2>&1; say "memcheck rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
