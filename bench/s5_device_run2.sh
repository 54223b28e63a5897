#!/bin/bash
# Kept from session 5 (payload folder .device/s5: stripped build-cuda binaries + libs + shared test data; probes built with nvcc -O3 -arch=sm_90a -std=c++20 -Isrc bench/probes/*.cu).
# Session 5 run 2: step-floor probe with L2-prefetch variants; the persistent kernel with L2 prefetch 0/1/2
# (tests + end to end); the row-kernel table with the tcb plane rows.
R=$(pwd); D=$R/.device/s5; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium; TT=$D/bin/tritium_tests
nvidia-smi -L | tee -a $S; date -u | tee -a $S
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
TRITIUM_CUDA_PERSISTENT_L2_PREFETCH=1 timeout 100 $TT --gtest_filter='CudaPersistent*' > $OUT/tests.log 2>&1; say "persistent tests with L2 prefetch 1 rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -10 | tee -a $S
timeout 90 $D/step_floor 15 > $OUT/floor.md 2>&1; say "floor rc=$? $(el)"; cat $OUT/floor.md | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
E="$TR cuda-bench -m /tmp/syn2b"
timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_tc2.md 2>&1; say "e2e tc2 layered rc=$? $(el)"
grep -E "^\| [0-9]|rror" $OUT/e2e_tc2.md | tee -a $S
for P in 0 1 2; do
  TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_L2_PREFETCH=$P TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers$P.md 2>&1; say "e2e persistent L2 prefetch $P rc=$? $(el)"
  grep -E "^\| [0-9]|rror|profile" $OUT/e2e_pers$P.md | head -5 | tee -a $S
done
timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
grep -E "copy bandwidth|RMSNorm|^\| (gate_up|down) .*\| 1 \| (GEMV dp4a, (8|32)|tcb binary MMA, auto)" $OUT/kernels.md | head -40 | tee -a $S
