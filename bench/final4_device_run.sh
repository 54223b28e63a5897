#!/bin/bash
# Session 4 final run (kept as bench/final4_device_run.sh): CUDA tests + memcheck of the tcb kernels, the kernel
# table (batches 1/4/16/512, tcb rows beside tc2 and cuBLAS), end-to-end decode A/B of the two GPU layouts.
R=$(pwd); . "$R/bench/device_preamble.sh" final4
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|persistent \]" $OUT/tests.log | head -20 | tee -a $S
timeout 100 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaKernels.Tcb*:CudaPersistentDecode.TinyBitnetLayouts*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
timeout 150 $TR cuda-bench --kernels --kernel-batches 1,4,16,512 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
grep -E "copy bandwidth|^\| (o|qkv|gate_up|down|lm_head) .*\| (1|16|512) \| (GEMV dp4a, (8|16|32)|GEMV int8 MMA, 16 rows x 8|GEMM|tcb)" $OUT/kernels.md | head -90 | tee -a $S
E="$TR cuda-bench -m /tmp/syn2b"
TRITIUM_CUDA_LAYOUT=tcb timeout 50 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_tcb.md 2>&1; say "e2e tcb rc=$? $(el)"
grep -E "model |weights read|^\| [0-9]|rror" $OUT/e2e_tcb.md | tee -a $S
TRITIUM_CUDA_LAYOUT=tc2 timeout 50 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_tc2.md 2>&1; say "e2e tc2 rc=$? $(el)"
grep -E "model |weights read|^\| [0-9]|rror" $OUT/e2e_tc2.md | tee -a $S
TRITIUM_CUDA_LAYOUT=tcb TRITIUM_CUDA_TCB_MAX_TOKENS=1 timeout 50 $E --batch 16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_tcb_mt1.md 2>&1; say "e2e tcb max-tokens 1 rc=$? $(el)"
grep -E "^\| [0-9]|rror" $OUT/e2e_tcb_mt1.md | tee -a $S
for L in tcb tc2; do
  TRITIUM_CUDA_LAYOUT=$L timeout 45 $E --batch 1 --prompt 1024 --gen 32 -r 2 > $OUT/e2e1k_$L.md 2>&1; say "e2e ctx1k $L rc=$? $(el)"
  grep -E "^\| [0-9]|rror" $OUT/e2e1k_$L.md | tee -a $S
done
