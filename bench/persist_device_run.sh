#!/bin/bash
# How the last persistent-decode figures of bench/CUDA_NOTES.md (version 9) were produced (run 6): tests, e2e persistent
# (with the phase profile) vs layered at 32 and 1024 positions, memcheck. Carries .device/persist (payload.tar.xz:
# bin/{tritium,tritium_tests} built with -DTRITIUM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DTRITIUM_MPI=OFF, lib/, shared/).
R=$(pwd); . "$R/bench/device_preamble.sh" persist
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 100 $TT --gtest_filter='CudaPersistent*:CudaKernels.*' > $OUT/tests.log 2>&1; say "tests rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|persistent \]" $OUT/tests.log | head -12 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
for env in "TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1" "TRITIUM_CUDA_PERSISTENT=0"; do
  env $env timeout 50 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e.md 2>&1; say "e2e [$env] rc=$? $(el)"
  grep -E "^\| [0-9]|profile|rror" $OUT/e2e.md | tee -a $S
done
for env in "TRITIUM_CUDA_PERSISTENT=1" "TRITIUM_CUDA_PERSISTENT=0"; do
  env $env timeout 40 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e1k.md 2>&1; say "e2e ctx1k [$env] rc=$? $(el)"
  grep -E "^\| [0-9]|rror" $OUT/e2e1k.md | tee -a $S
done
timeout 60 compute-sanitizer --tool memcheck $TT --gtest_filter='CudaPersistentDecode.Tiny*' > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3 | tee -a $S
