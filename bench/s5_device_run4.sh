#!/bin/bash
# Kept from session 5 (payload folder .device/s5: stripped build-cuda binaries + libs + shared test data; probes built with nvcc -O3 -arch=sm_90a -std=c++20 -Isrc bench/probes/*.cu).
# Session 5 run 4: the persistent kernel over tcb weights (tests + memcheck), end to end: layered tc2 / tcb,
# persistent tc2 / tcb (profile); the row-kernel rows of the overlapped bit transpose.
R=$(pwd); D=$R/.device/s5; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium; TT=$D/bin/tritium_tests
nvidia-smi -L | tee -a $S; date -u | tee -a $S
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|persistent \]" $OUT/tests.log | head -30 | tee -a $S
timeout 120 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaPersistentDecode.TinyBitnetTcb*:CudaKernels.TcbProjection*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
E="$TR cuda-bench -m /tmp/syn2b"
for L in tc2 tcb; do
  TRITIUM_CUDA_LAYOUT=$L timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e layered $L rc=$? $(el)"
  grep -E "^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
  TRITIUM_CUDA_LAYOUT=$L TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers_$L.md 2>&1; say "e2e persistent $L rc=$? $(el)"
  grep -E "^\| [0-9]|rror|profile|model " $OUT/e2e_pers_$L.md | head -5 | tee -a $S
done
TRITIUM_CUDA_LAYOUT=tcb TRITIUM_CUDA_PERSISTENT=1 timeout 40 $E --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e1k_pers_tcb.md 2>&1; say "e2e 1k persistent tcb rc=$? $(el)"
grep -E "^\| [0-9]|rror" $OUT/e2e1k_pers_tcb.md | tee -a $S
timeout 40 $E --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e1k_tc2.md 2>&1; say "e2e 1k layered tc2 rc=$? $(el)"
grep -E "^\| [0-9]|rror" $OUT/e2e1k_tc2.md | tee -a $S
timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
grep -E "copy bandwidth|RMSNorm" $OUT/kernels.md | head -40 | tee -a $S
