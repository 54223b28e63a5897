#!/bin/bash
# Session 5 device runs (issue #4; bench/RESULTS.md "Session 5", bench/CUDA_NOTES.md version 12), kept as they ran:
# `bash bench/s5_device_runs.sh N` from the checkout root on the device, with the payload folder .device/s5 carried
# (payload.tar.xz: stripped build-cuda binaries bin/, the libraries they need lib/, ../shared test data shared/; the
# probes step_floor and planes_probe built here with nvcc -O3 -arch=sm_90a -std=c++20 -Isrc bench/probes/X.cu).
# Each run took the binaries of its moment; run 7 is the final code.
RUN=${1:?usage: s5_device_runs.sh RUN (1-7)}
R=$(pwd); . "$R/bench/device_preamble.sh" s5
E="$TR cuda-bench -m /tmp/syn2b"
if [ "$RUN" = 6 ]; then  # synthesis in the foreground: no tests in this run
  timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; say "synth rc=$? $(el)"
else
  (timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
fi
case "$RUN" in
1)
  # (the step-floor probe of this run was an earlier version: no lm_head column, no 512-thread rows)
  # verify main's CUDA tests + memcheck (tcb edits of session 4 unverified), the step-floor probe,
  # end-to-end batch 1 (tc2 layered, tcb, persistent), the batch-1 kernel table.
  timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -20 | tee -a $S
  timeout 120 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaKernels.Tcb*:CudaPersistentDecode.TinyBitnetLayouts*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
  timeout 60 $D/step_floor 15 > $OUT/floor.md 2>&1; say "floor rc=$? $(el)"; cat $OUT/floor.md | tee -a $S
  wait; tail -1 $OUT/synth.log | tee -a $S
  for L in tc2 tcb; do
    TRITIUM_CUDA_LAYOUT=$L timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e $L rc=$? $(el)"
    grep -E "weights read|^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
  done
  TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers.md 2>&1; say "e2e persistent rc=$? $(el)"
  grep -E "^\| [0-9]|rror|persistent|phase|layer" $OUT/e2e_pers.md | head -20 | tee -a $S
  timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
  grep -E "copy bandwidth|^\| (o|qkv|gate_up|down|lm_head) .*\| 1 \|" $OUT/kernels.md | head -40 | tee -a $S
  ;;
2)
  # (TRITIUM_CUDA_PERSISTENT_L2_PREFETCH was an option of that build only: it lost and was not kept)
  # step-floor probe with L2-prefetch variants; the persistent kernel with L2 prefetch 0/1/2
  # (tests + end to end); the row-kernel table with the tcb plane rows.
  TRITIUM_CUDA_PERSISTENT_L2_PREFETCH=1 timeout 100 $TT --gtest_filter='CudaPersistent*' > $OUT/tests.log 2>&1; say "persistent tests with L2 prefetch 1 rc=$? $(el)"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -10 | tee -a $S
  timeout 90 $D/step_floor 15 > $OUT/floor.md 2>&1; say "floor rc=$? $(el)"; cat $OUT/floor.md | tee -a $S
  wait; tail -1 $OUT/synth.log | tee -a $S
  timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_tc2.md 2>&1; say "e2e tc2 layered rc=$? $(el)"
  grep -E "^\| [0-9]|rror" $OUT/e2e_tc2.md | tee -a $S
  for P in 0 1 2; do
    TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_L2_PREFETCH=$P TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers$P.md 2>&1; say "e2e persistent L2 prefetch $P rc=$? $(el)"
    grep -E "^\| [0-9]|rror|profile" $OUT/e2e_pers$P.md | head -5 | tee -a $S
  done
  timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
  grep -E "copy bandwidth|RMSNorm|^\| (gate_up|down) .*\| 1 \| (GEMV dp4a, (8|32)|tcb binary MMA, auto)" $OUT/kernels.md | head -40 | tee -a $S
  ;;
3)
  # tcb planes by a warp bit transpose (tests + memcheck, row-kernel rows, end-to-end tcb vs tc2),
  # step-floor probe with 512-thread and register-streamed variants.
  timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -20 | tee -a $S
  timeout 100 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaKernels.TcbProjection*:CudaPersistentDecode.TinyBitnetLayouts*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
  timeout 90 $D/step_floor 15 > $OUT/floor.md 2>&1; say "floor rc=$? $(el)"; cat $OUT/floor.md | tee -a $S
  wait; tail -1 $OUT/synth.log | tee -a $S
  for L in tc2 tcb; do
    TRITIUM_CUDA_LAYOUT=$L timeout 50 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e $L rc=$? $(el)"
    grep -E "^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
  done
  timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
  grep -E "copy bandwidth|RMSNorm|^\| (gate_up|down) .*\| 1 \| (GEMV dp4a, (8|32)|tcb binary MMA, auto)" $OUT/kernels.md | head -40 | tee -a $S
  ;;
4)
  # the persistent kernel over tcb weights (tests + memcheck), end to end: layered tc2 / tcb,
  # persistent tc2 / tcb (profile); the row-kernel rows of the overlapped bit transpose.
  timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|persistent \]" $OUT/tests.log | head -30 | tee -a $S
  timeout 120 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaPersistentDecode.TinyBitnetTcb*:CudaKernels.TcbProjection*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
  wait; tail -1 $OUT/synth.log | tee -a $S
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
  ;;
5)
  # bit-plane probe (ballot / word-by-word transpose / lockstep transpose), CUDA tests, end to end
  # layered tc2 / tcb and persistent tcb, the row-kernel rows.
  timeout 30 $D/planes_probe > $OUT/planes.md 2>&1; say "planes probe rc=$? $(el)"; cat $OUT/planes.md | tee -a $S
  timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -20 | tee -a $S
  wait; tail -1 $OUT/synth.log | tee -a $S
  for L in tc2 tcb; do
    TRITIUM_CUDA_LAYOUT=$L timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e layered $L rc=$? $(el)"
    grep -E "^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
  done
  TRITIUM_CUDA_LAYOUT=tcb TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 40 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers_tcb.md 2>&1; say "e2e persistent tcb rc=$? $(el)"
  grep -E "^\| [0-9]|rror|profile" $OUT/e2e_pers_tcb.md | head -5 | tee -a $S
  timeout 100 $TR cuda-bench --kernels --kernel-batches 1 > $OUT/kernels.md 2>&1; say "kernels rc=$? $(el)"
  grep -E "copy bandwidth|RMSNorm.*\| 1 x" $OUT/kernels.md | head -10 | tee -a $S
  ;;
6)
  # end to end batch 1, layered tc2 / tcb and persistent tc2 / tcb (same binary as run 5).
  timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; say "synth rc=$? $(el)"
  for L in tc2 tcb; do
    TRITIUM_CUDA_LAYOUT=$L timeout 80 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e layered $L rc=$? $(el)"
    grep -E "loaded|^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
    TRITIUM_CUDA_LAYOUT=$L TRITIUM_CUDA_PERSISTENT=1 TRITIUM_CUDA_PERSISTENT_PROFILE=1 timeout 80 $E --batch 1 --prompt 32 --gen 64 -r 3 > $OUT/e2e_pers_$L.md 2>&1; say "e2e persistent $L rc=$? $(el)"
    grep -E "^\| [0-9]|rror|profile" $OUT/e2e_pers_$L.md | head -5 | tee -a $S
  done
  ;;
7)
  # (final) CUDA tests + memcheck of the tcb paths on the final code; generate on the bundled model
  # (auto layout = tcb for one sequence); end to end batch 1/16 with the auto layout of cuda-bench (tc2) and tcb
  # (the threaded tcb packer: load time).
  timeout 200 $TT --gtest_filter='*Cuda*' > $OUT/tests.log 2>&1; say "cuda tests rc=$? $(el)"
  grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -20 | tee -a $S
  timeout 100 compute-sanitizer --tool memcheck $TT --gtest_filter="CudaPersistentDecode.TinyBitnetTcb*:CudaKernels.Tcb*:CudaLayout.*" > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
  timeout 60 $TR generate --device cuda -p "The capital of France is" -n 24 --temp 0 > $OUT/gen.txt 2> $OUT/gen.err; say "generate rc=$? $(el)"
  cat $OUT/gen.txt | head -3 | tee -a $S; grep -iE "cuda|tcb|tc2|tok/s" $OUT/gen.err | head -5 | tee -a $S
  wait; tail -1 $OUT/synth.log | tee -a $S
  for L in auto tcb; do
    TRITIUM_CUDA_LAYOUT=$L timeout 80 $E --batch 1,16 --prompt 32 --gen 64 -r 3 > $OUT/e2e_$L.md 2>&1; say "e2e layout $L rc=$? $(el)"
    grep -E "loaded|^\| [0-9]|rror" $OUT/e2e_$L.md | tee -a $S
  done
  ;;
*) echo "RUN must be 1-7"; exit 2 ;;
esac
wait
