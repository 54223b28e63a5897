#!/bin/bash
# Device run for the attention kernels (split-K decode, flash-style prefill): CUDA tests (new kernels vs
# attention_paged / a double reference, goldens with --device cuda under the automatic choice and under
# TRITIUM_CUDA_ATTENTION=basic), compute-sanitizer memcheck + racecheck on the attention tests, the attention lines
# of the kernel table, end-to-end decode of the synthetic 2B4T at a 1K context (auto vs basic) and a 512-token
# prefill. Run from the repository root with .device/attn carried, holding payload.tar.xz: bin/{tritium,
# tritium_tests} (stripped, cmake -S . -B build-cuda -G Ninja -DTRITIUM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
# -DTRITIUM_BUILD_BENCH=OFF -DTRITIUM_MPI=OFF), lib/ (their non-system .so files), shared/ (as for
# bench/decode_device_run.sh). The lead adapts the paths. ~3-4 min.
R=$(pwd); D=$R/.device/attn; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s)
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
TR=$D/bin/tritium
nvidia-smi -L | tee -a $S; date -u | tee -a $S
ldd $TR | grep "not found" | tee -a $S
(timeout 80 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 150 $D/bin/tritium_tests --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "tests (auto) rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Which is|Expected|Value of|ctx|row " $OUT/tests.log | head -30 | tee -a $S
TRITIUM_CUDA_ATTENTION=basic timeout 100 $D/bin/tritium_tests --gtest_filter='*Golden*Cuda*' > $OUT/tests_basic.log 2>&1
say "golden tests (TRITIUM_CUDA_ATTENTION=basic) rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_basic.log | head -10 | tee -a $S
timeout 120 compute-sanitizer --tool memcheck $D/bin/tritium_tests --gtest_filter='CudaKernels.Attention*' > $OUT/memcheck.log 2>&1
say "memcheck rc=$? ($(( $(date +%s) - T0 )) s)"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
timeout 120 compute-sanitizer --tool racecheck $D/bin/tritium_tests --gtest_filter='CudaKernels.AttentionPrefill*:CudaKernels.AttentionSplit*' > $OUT/racecheck.log 2>&1
say "racecheck rc=$? ($(( $(date +%s) - T0 )) s)"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -5 | tee -a $S
timeout 90 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "copy bandwidth|attention" $OUT/kernels.md | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
for mode in auto basic; do
  TRITIUM_CUDA_ATTENTION=$mode timeout 60 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e_ctx1k_$mode.md 2>&1
  say "e2e ctx1k batch 1 ($mode) rc=$? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| [0-9]" $OUT/e2e_ctx1k_$mode.md | tee -a $S
  TRITIUM_CUDA_ATTENTION=$mode timeout 60 $TR cuda-bench -m /tmp/syn2b --batch 1,16 --prompt 32 --gen 32 -r 2 > $OUT/e2e_ctx32_$mode.md 2>&1
  say "e2e ctx32 batch 1,16 ($mode) rc=$? ($(( $(date +%s) - T0 )) s)"; grep -E "^\| [0-9]" $OUT/e2e_ctx32_$mode.md | tee -a $S
done
