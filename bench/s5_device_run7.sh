#!/bin/bash
# Kept from session 5 (payload folder .device/s5: stripped build-cuda binaries + libs + shared test data; probes built with nvcc -O3 -arch=sm_90a -std=c++20 -Isrc bench/probes/*.cu).
# Session 5 run 7 (final): CUDA tests + memcheck of the tcb paths on the final code; generate on the bundled model
# (auto layout = tcb for one sequence); end to end batch 1/16 with the auto layout of cuda-bench (tc2) and tcb
# (the threaded tcb packer: load time).
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
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -20 | tee -a $S
timeout 100 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaPersistentDecode.TinyBitnetTcb*:CudaKernels.Tcb*:CudaLayout.*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
timeout 60 $TR generate --device cuda -p "The capital of France is" -n 24 --temp 0 > $OUT/gen.txt 2> $OUT/gen.err; say "generate rc=$? $(el)"
cat $OUT/gen.txt | head -3 | tee -a $S; grep -iE "cuda|tcb|tc2|tok/s" $OUT/gen.err | head -5 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
E="$TR cuda-bench -m /tmp/syn2b"
for L in auto tcb; do
  TRITIUM_CUDA_LAYOUT=$L timeout 80 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e layout $L rc=$? $(el)"
  grep -E "loaded|^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
done
