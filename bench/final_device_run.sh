#!/bin/bash
# Kept as run (bash .device/final/run.sh with .device/final carried: payload.tar.xz = bin/{tritium,tritium_tests} built
# with -DTRITIUM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DTRITIUM_MPI=OFF, lib/ (non-system .so), shared/ (tiny-qwen2,
# goldens, wiki.test.raw, 2852-0.txt)).
# Final verification of merged main on nvidia-h200-x2: CUDA + int8 + TP tests, memcheck, end-to-end decode
# (bf16 vs int8 head), TP=1 vs TP=2 (2B4T greedy/ppl; tiny-qwen2 llm-int8 greedy), bench serve 64 (backlog fix).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(pwd); D=$R/.device/final; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/summary.txt; : > $S
say() { echo "$*" | tee -a $S; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd $D && tar -xJf payload.tar.xz) || { say "payload missing"; exit 1; }
NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$D/lib:$NCCL_LIB:/usr/local/cuda/lib64:$LD_LIBRARY_PATH TRITIUM_TEST_DATA=$D/shared
[ -e /work/main/models ] || { mkdir -p /work/main/tests && ln -sfn $R/models /work/main/models && ln -sfn $R/tests/data /work/main/tests/data; }
TR=$D/bin/tritium
nvidia-smi -L | tee -a $S; date -u | tee -a $S; ldd $TR | grep "not found" | tee -a $S
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 170 $D/bin/tritium_tests --gtest_filter='*Cuda*:TensorParallel*' > $OUT/tests.log 2>&1; say "tests rc=$? $(el)"
grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|Which is|Expected|tp2 vs tp1|greedy|ppl" $OUT/tests.log | head -30 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
for h in "" "--lm-head int8"; do
  timeout 75 $TR cuda-bench -m /tmp/syn2b $h --batch 1,16 --prompt 32 --gen 32 -r 2 > $OUT/e2e.md 2>&1; say "e2e [$h] rc=$? $(el)"
  grep -E "weights read|^\| [0-9]" $OUT/e2e.md | tee -a $S
done
P="The history of the city begins with"
for spec in "/tmp/syn2b|" "$D/shared/models/tiny-qwen2|--quant llm-int8"; do
  m=${spec%%|*}; q=${spec#*|}; n=$(basename $m)
  timeout 60 $TR generate -m $m $q --device cuda -p "$P" -n 48 --temp 0 --ignore-eos > /tmp/g1.txt 2> /tmp/g1.err
  timeout 60 $TR generate -m $m $q --device cuda --tensor-parallel 2 -p "$P" -n 48 --temp 0 --ignore-eos > /tmp/g2.txt 2> /tmp/g2.err
  cmp -s /tmp/g1.txt /tmp/g2.txt && say "$n [$q] greedy 48 TP1 vs TP2: IDENTICAL $(el)" || { say "$n [$q] greedy DIFFER $(el)"; tail -2 /tmp/g2.err | tee -a $S; }
  grep -h "decode:" /tmp/g1.err /tmp/g2.err | tee -a $S
done
for tp in 1 2; do
  [ $(( $(date +%s) - T0 )) -gt 330 ] && { say "skip serve tp=$tp (time)"; continue; }
  port=$((18700 + tp))
  timeout 100 $TR serve -m /tmp/syn2b --device cuda --tensor-parallel $tp --port $port --kv-cache-memory 3GiB --max-num-seqs 64 > $OUT/serve_tp$tp.log 2>&1 &
  sp=$!
  python3 -c "
import time, urllib.request
for i in range(120):
    try: urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=1); break
    except Exception: time.sleep(0.5)"
  timeout 50 $TR bench serve --url http://127.0.0.1:$port --max-concurrency 64 --num-prompts 128 --input-len 128 --output-len 64 --seed 1 > $OUT/bench_tp$tp.log 2>&1; say "bench serve tp=$tp rc=$? $(el)"
  grep -E "Successful|Failed|Output token|Median TTFT|Median TPOT|Median ITL|P99 ITL|first error" $OUT/bench_tp$tp.log | tee -a $S
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
done
timeout 70 compute-sanitizer --tool memcheck $D/bin/tritium_tests --gtest_filter='CudaKernels.*:CudaInt8.Gemm*:CudaInt8.Every*:CudaInt8.Batch*' > $OUT/memcheck.log 2>&1; say "memcheck rc=$? $(el)"
grep -E "ERROR SUMMARY|PASSED|FAILED" $OUT/memcheck.log | head -5 | tee -a $S
cd $OUT && tar czf logs.tgz *.log *.md 2>/dev/null; rm -f *.log *.md
