#!/bin/bash
# Merged main + attn branch on nvidia-h200-x2 (adapted from bench/attn_device_run.sh; most important first).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(pwd); D=$R/.device/attn; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$D/lib:$NCCL_LIB:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium
date -u | tee -a $S; ldd $TR | grep "not found" | tee -a $S
(timeout 80 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 150 $D/bin/tritium_tests --gtest_filter='*Cuda*:TensorParallel*' > $OUT/tests.log 2>&1; say "tests (auto) rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Which is|Expected|Value of|ppl|tp2 vs" $OUT/tests.log | head -30 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
for mode in auto basic; do
  TRITIUM_CUDA_ATTENTION=$mode timeout 50 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e_ctx1k_$mode.md 2>&1
  say "e2e ctx1k batch 1 ($mode) rc=$? $(el)"; grep -E "^\| [0-9]" $OUT/e2e_ctx1k_$mode.md | tee -a $S
done
TRITIUM_CUDA_ATTENTION=auto timeout 50 $TR cuda-bench -m /tmp/syn2b --batch 1,16 --prompt 32 --gen 32 -r 2 > $OUT/e2e_ctx32.md 2>&1
say "e2e ctx32 (auto) rc=$? $(el)"; grep -E "^\| [0-9]" $OUT/e2e_ctx32.md | tee -a $S
timeout 60 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
grep -E "copy bandwidth|attention" $OUT/kernels.md | tee -a $S
TRITIUM_CUDA_ATTENTION=basic timeout 60 $D/bin/tritium_tests --gtest_filter='*Golden*Cuda*' > $OUT/tests_basic.log 2>&1
say "golden (basic) rc=$? $(el)"; grep -E "^\[  (PASSED|FAILED)|FAILED" $OUT/tests_basic.log | head -5 | tee -a $S
timeout 60 compute-sanitizer --tool memcheck $D/bin/tritium_tests --gtest_filter='CudaKernels.Attention*' > $OUT/memcheck.log 2>&1
say "memcheck rc=$? $(el)"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3 | tee -a $S
timeout 50 compute-sanitizer --tool racecheck $D/bin/tritium_tests --gtest_filter='CudaKernels.AttentionPrefill*:CudaKernels.AttentionSplit*' > $OUT/racecheck.log 2>&1
say "racecheck rc=$? $(el)"; grep -E "RACECHECK SUMMARY|ERROR SUMMARY|PASSED|FAILED" $OUT/racecheck.log | head -3 | tee -a $S
cd $OUT && tar czf logs.tgz *.log *.md 2>/dev/null; rm -f *.log *.md
