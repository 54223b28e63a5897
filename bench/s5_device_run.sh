#!/bin/bash
# Kept from session 5 (payload folder .device/s5: stripped build-cuda binaries + libs + shared test data; probes built with nvcc -O3 -arch=sm_90a -std=c++20 -Isrc bench/probes/*.cu).
# Session 5 run 1: verify main's CUDA tests + memcheck (tcb edits of session 4 unverified), the step-floor probe,
# end-to-end batch 1 (tc2 layered, tcb, persistent), the batch-1 kernel table.
R=$(pwd); D=$R/.device/s5; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium; TT=$D/bin/tritium_tests
nvidia-smi -L | tee -a $S; date -u | tee -a $S; ldd $TR | grep "not found" | tee -a $S
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -20 | tee -a $S
timeout 120 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaKernels.Tcb*:CudaPersistentDecode.TinyBitnetLayouts*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
timeout 60 $D/step_floor 15 > $OUT/floor.md 2>&1; say "floor rc=$? $(el)"; cat $OUT/floor.md | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
E="$TR cuda-bench -m /tmp/syn2b"
for L in tc2 tcb; do
  TRITIUM_CUDA_LAYOUT=$L timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e $L rc=$? $(el)"
  grep -E "weights read|^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
done
TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers.md 2>&1; say "e2e persistent rc=$? $(el)"
grep -E "^\| [0-9]|rror|persistent|phase|layer" $OUT/e2e_pers.md | head -20 | tee -a $S
timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
grep -E "copy bandwidth|^\| (o|qkv|gate_up|down|lm_head) .*\| 1 \|" $OUT/kernels.md | head -40 | tee -a $S
