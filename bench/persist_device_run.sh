#!/bin/bash
# How the persistent-decode figures of bench/CUDA_NOTES.md (version 9, last two table rows) were produced: tests,
# e2e layered (batch 1, 16) and persistent decode of the synthetic 2B4T with phase profiles. Run from the repository
# root with .device/persist carried (payload.tar.xz: bin/{tritium,tritium_tests} built with -DTRITIUM_CUDA=ON
# -DCMAKE_CUDA_ARCHITECTURES=90 -DTRITIUM_MPI=OFF, lib/ (non-system .so), shared/ (tiny-qwen2, goldens, texts)).
# TRITIUM_CUDA_PERSISTENT_LOOKAHEAD selected the weight look-ahead mode of that build (2 paced, 1 one layer ahead,
# 0 own phase); the switch was removed afterwards and mode 0 kept.
R=$(pwd); D=$R/.device/persist; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium; TT=$D/bin/tritium_tests
nvidia-smi -L | tee -a $S; date -u | tee -a $S; ldd $TR | grep "not found" | tee -a $S
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
for la in 2 1 0; do
TRITIUM_CUDA_PERSISTENT_LOOKAHEAD=$la timeout 60 $TT --gtest_filter='CudaPersistentDecode.Tiny*' > $OUT/tests_p.log 2>&1; say "persistent tests [lookahead $la] rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|persistent \]|rror" $OUT/tests_p.log | head -10 | tee -a $S
done
wait; tail -1 $OUT/synth.log | tee -a $S
TRITIUM_CUDA_PERSISTENT=0 timeout 60 $TR cuda-bench -m /tmp/syn2b --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_layered.md 2>&1; say "e2e layered rc=$? $(el)"
grep -E "^\| [0-9]|rror" $OUT/e2e_layered.md | tee -a $S
for la in 2 1 0; do
  TRITIUM_CUDA_PERSISTENT_LOOKAHEAD=$la TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 60 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/prof$la.md 2>&1; say "profile [lookahead $la] rc=$? $(el)"
  grep -E "^\| [0-9]|profile|rror" $OUT/prof$la.md | tee -a $S
done
