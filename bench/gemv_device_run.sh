#!/bin/bash
# How the version-8 GEMV figures of bench/RESULTS.md ("CUDA (H200)", "GEMV: int8 tensor-core GEMV ...") and
# bench/CUDA_NOTES.md were produced: CUDA kernel tests, the kernel table at batch 1/2/4/8/16, memcheck on the
# ternary tests. Run from the repository root with .device/gemv carried, holding payload.tar.xz: bin/{tritium,
# tritium_tests} (stripped, built with cmake -S . -B build-cuda -G Ninja -DTRITIUM_CUDA=ON
# -DCMAKE_CUDA_ARCHITECTURES=90 -DTRITIUM_BUILD_BENCH=OFF -DTRITIUM_MPI=OFF) and lib/ (libfmt.so.9
# libpcre2-8.so.0 libicuuc.so.72 libicudata.so.72 libcpp-httplib.so.0.11 libgomp.so.1 libbrotli{common,dec,enc}.so.1
# from /lib/x86_64-linux-gnu). ~45 s.
R=$(pwd); D=$R/.device/gemv; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s)
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
nvidia-smi -L | tee -a $S; ldd $D/bin/tritium | grep "not found" | tee -a $S
timeout 40 $D/bin/tritium_tests --gtest_filter='CudaKernels.*' > $OUT/tests.log 2>&1; say "tests rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure" $OUT/tests.log | head -12 | tee -a $S
timeout 125 $D/bin/tritium cuda-bench --kernels --kernel-batches ${KB:-1,2,4,8,16} > $OUT/kernels.md 2>&1; say "kernels rc=$? ($(( $(date +%s) - T0 )) s)"
grep -E "copy bandwidth|^\| (gate_up|down) .*\| 1 \|" $OUT/kernels.md | grep -v BITCOS | cut -d'|' -f2-6 | tee -a $S
LEFT=$(( 190 - ($(date +%s) - T0) )); [ $LEFT -gt 40 ] && LEFT=40
if [ $LEFT -gt 10 ]; then
  timeout $LEFT compute-sanitizer --tool memcheck $D/bin/tritium_tests --gtest_filter='CudaKernels.Ternary*' > $OUT/memcheck.log 2>&1; say "memcheck rc=$? ($(( $(date +%s) - T0 )) s)"
  grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
fi
