#!/bin/bash
# Session 3 final verification on nvidia-h200 (kept as bench/final3_device_run.sh): all CUDA tests, memcheck of the
# new kernels, end-to-end decode of the synthetic 2B4T (batch 1 / 16, 1K context, int8 head, persistent opt-in).
R=$(pwd); . "$R/bench/device_preamble.sh" final3
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 150 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|persistent \]" $OUT/tests.log | head -20 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
timeout 60 $TR cuda-bench --kernels --kernel-batches 1,16 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
grep -E "copy bandwidth|^\| (o|qkv|gate_up|down|lm_head) .*\| 1 \||RMSNorm|GLU" $OUT/kernels.md | head -16 | tee -a $S
timeout 60 $TR cuda-bench -m /tmp/syn2b --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e.md 2>&1; say "e2e rc=$? $(el)"
grep -E "model |weights read|^\| [0-9]|rror" $OUT/e2e.md | tee -a $S
timeout 45 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e1k.md 2>&1; say "e2e ctx1k rc=$? $(el)"
grep -E "^\| [0-9]|rror" $OUT/e2e1k.md | tee -a $S
timeout 45 $TR cuda-bench -m /tmp/syn2b --lm-head int8 --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_i8.md 2>&1; say "e2e int8 head rc=$? $(el)"
grep -E "weights read|^\| [0-9]|rror" $OUT/e2e_i8.md | tee -a $S
TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 45 $TR cuda-bench -m /tmp/syn2b --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_p.md 2>&1; say "e2e persistent rc=$? $(el)"
grep -E "model |^\| [0-9]|profile|rror" $OUT/e2e_p.md | tee -a $S
timeout 100 compute-sanitizer --tool memcheck $TT --gtest_filter="${MEMCHECK:-CudaPersistentDecode.Tiny*:CudaKernels.Ternary*}" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
