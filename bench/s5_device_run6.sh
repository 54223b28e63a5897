#!/bin/bash
# Kept from session 5 (payload folder .device/s5: stripped build-cuda binaries + libs + shared test data; probes built with nvcc -O3 -arch=sm_90a -std=c++20 -Isrc bench/probes/*.cu).
# Session 5 run 6: end to end batch 1, layered tc2 / tcb and persistent tc2 / tcb (same binary as run 5).
R=$(pwd); D=$R/.device/s5; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
TR=$D/bin/tritium
nvidia-smi -L | tee -a $S; date -u | tee -a $S
timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; say "synth rc=$? $(el)"
E="$TR cuda-bench -m /tmp/syn2b"
for L in tc2 tcb; do
  TRITIUM_CUDA_LAYOUT=$L timeout 80 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e layered $L rc=$? $(el)"
  grep -E "loaded|^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
  TRITIUM_CUDA_LAYOUT=$L TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 80 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers_$L.md 2>&1; say "e2e persistent $L rc=$? $(el)"
  grep -E "^\| [0-9]|rror|profile" $OUT/e2e_pers_$L.md | head -5 | tee -a $S
done
