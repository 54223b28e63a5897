#!/bin/bash
# bitcos branch (GPU BITCOS GEMV): tests, memcheck, kernel bench rows. Usage on the device:
#   run(command="bash .device/bitcos/run.sh", carry=[".device/bitcos"], timeout_s=300)
R=$(pwd); D=$R/.device/bitcos; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
date -u | tee -a $S; ldd $D/bin/tritium | grep "not found" | tee -a $S
F='CudaBitcos.*:CudaKernels.Bitcos*:CudaTc2.*:CudaKernels.TernaryMatmul*:CudaKernels.TernaryProjection*'
timeout 120 $D/bin/tritium_tests --gtest_filter="$F" > $OUT/tests.log 2>&1; say "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Which is|Expected|Value of" $OUT/tests.log | head -30 | tee -a $S
timeout 90 compute-sanitizer --tool memcheck $D/bin/tritium_tests --gtest_filter='CudaKernels.Bitcos*' > $OUT/memcheck.log 2>&1
say "memcheck rc=$?"; grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -3 | tee -a $S
timeout 150 $D/bin/tritium cuda-bench --kernels --kernel-batches 1,4,8 > $OUT/kernels.md 2>&1; say "kernels rc=$?"
grep -E "copy bandwidth|GEMV" $OUT/kernels.md | tee -a $S
