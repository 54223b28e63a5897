#!/bin/bash
# Tensor parallelism on nvidia-h200-x2 (bench/RESULTS.md "Tensor parallelism (2x H200)", docs/tensor_parallel.md).
# Run from the repository root with .device/tp carried, holding payload.tar.xz: bin/{tritium,tritium_tests} built
# with  cmake -S . -B build-cuda -G Ninja -DTRITIUM_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DTRITIUM_BUILD_BENCH=OFF
# (stripped), lib/ (their non-system .so files), models/tiny-qwen2, wiki.txt (first 200 kB of wikitext-2 test).
# libnccl.so.2 is not carried (218 MB): the device's nvidia-nccl-cu13 Python package provides it (dlopen).
# Writes $OUT/tp_summary.txt and logs; finishes in < 6 minutes (every step has a timeout).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
R=$(pwd); D=$R/.device/tp; OUT=${OUT:-/tmp/out}; mkdir -p $OUT; S=$OUT/tp_summary.txt; : > $S
T0=$(date +%s)
(cd $D && tar -xJf payload.tar.xz) || { echo "payload missing" | tee $S; exit 1; }
say() { echo "$*" | tee -a $S; }
NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
[ -e "$NCCL_LIB/libnccl.so.2" ] || NCCL_LIB=$(dirname "$(find / -name 'libnccl.so.2' -not -path '/proc/*' 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$D/lib:$NCCL_LIB:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
mkdir -p $D/shared/models && ln -sfn $D/models/tiny-qwen2 $D/shared/models/tiny-qwen2
mkdir -p /work/wt-tp && ln -sfn $R/models /work/wt-tp/models && mkdir -p /work/wt-tp/tests && ln -sfn $R/tests/data /work/wt-tp/tests/data
export TRITIUM_TEST_DATA=$D/shared
TR=$D/bin/tritium
nvidia-smi -L | tee -a $S
say "nccl lib: $NCCL_LIB"; ldd $TR | grep -E 'not found' | tee -a $S
# 1. tests (CPU proof + 2-GPU NCCL test) while the synthetic 2B4T model is written
(timeout 90 $TR synth --shape bitnet-2b4t -o /tmp/syn2b > $OUT/synth.log 2>&1; echo "synth rc=$?" >> $OUT/synth.log) &
timeout 120 $D/bin/tritium_tests --gtest_filter='TensorParallel*' > $OUT/tests.log 2>&1; say "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|OK \]|FAILED|tp2 vs tp1|Failure|Which is|SKIP" $OUT/tests.log | head -30 | tee -a $S
wait; tail -1 $OUT/synth.log | tee -a $S
# 2. greedy + perplexity, TP=1 vs TP=2 (if a TP=2 run fails, it is retried once without CUDA graphs)
head -c 60000 $D/wiki.txt > /tmp/wiki.txt
run2() {  # run2 LOG CMD...: TP=2 with a retry without graphs
  local log=$1; shift
  timeout 60 "$@" --tensor-parallel 2 > $log 2> $log.err || { say "  retry without graphs: $(tail -2 $log.err | tr '\n' ' ')";
    TRITIUM_CUDA_GRAPHS=0 timeout 60 "$@" --tensor-parallel 2 > $log 2> $log.err; }
}
for m in $D/models/tiny-qwen2 $R/models/tiny-bitnet /tmp/syn2b; do
  n=$(basename $m); say "== $n"
  P="The history of the city begins with"
  timeout 60 $TR generate -m $m --device cuda -p "$P" -n 48 --temp 0 --ignore-eos > /tmp/g1_$n.txt 2> /tmp/g1_$n.err
  run2 /tmp/g2_$n.txt $TR generate -m $m --device cuda -p "$P" -n 48 --temp 0 --ignore-eos
  cmp -s /tmp/g1_$n.txt /tmp/g2_$n.txt && say "  greedy 48 tokens: IDENTICAL" || { say "  greedy: DIFFER"; head -c 300 /tmp/g1_$n.txt >> $S; echo >> $S; head -c 300 /tmp/g2_$n.txt >> $S; echo >> $S; tail -3 /tmp/g2_$n.txt.err >> $S; }
  grep -h -iE 'tok/s|tokens/s' /tmp/g1_$n.err /tmp/g2_$n.txt.err | head -2 | sed 's/^/  /' | tee -a $S
  C=128; [ $n = syn2b ] && C=256
  timeout 90 $TR perplexity -m $m --device cuda -f /tmp/wiki.txt -c $C --chunks 4 > /tmp/p1_$n.txt 2> /tmp/p1_$n.err
  run2 /tmp/p2_$n.txt $TR perplexity -m $m --device cuda -f /tmp/wiki.txt -c $C --chunks 4
  python3 - /tmp/p1_$n.txt /tmp/p2_$n.txt <<'PY' | tee -a $S
import re, sys
v = [float(re.search(r"PPL = ([0-9.eE+-]+)", open(f).read()).group(1)) if re.search(r"PPL = ", open(f).read()) else None for f in sys.argv[1:]]
if None in v: print("  perplexity: missing", v)
else: print(f"  perplexity tp1 {v[0]:.4f} tp2 {v[1]:.4f} rel diff {abs(v[1]-v[0])/v[0]*100:.5f}% {'OK' if abs(v[1]-v[0]) <= 1e-3*v[0] else 'OVER 0.1%'}")
PY
  cat /tmp/g1_$n.err /tmp/g2_$n.txt.err /tmp/p1_$n.err /tmp/p2_$n.txt.err > $OUT/run_$n.log 2>/dev/null
done
say "elapsed $(( $(date +%s) - T0 )) s"
# 3. throughput: tritium serve on syn2b, TP=1 vs TP=2, bench serve at 64 concurrent requests
for tp in 1 2; do
  [ $(( $(date +%s) - T0 )) -gt 270 ] && { say "skipping serve tp=$tp (time)"; continue; }
  port=$((18600 + tp))
  timeout 120 $TR serve -m /tmp/syn2b --device cuda --tensor-parallel $tp --port $port --kv-cache-memory 3GiB \
    --max-num-seqs 64 > $OUT/serve_tp$tp.log 2>&1 &
  sp=$!
  python3 -c "
import time, urllib.request
for i in range(120):
    try: urllib.request.urlopen('http://127.0.0.1:$port/v1/models', timeout=1); break
    except Exception: time.sleep(0.5)"
  timeout 60 $TR bench serve --url http://127.0.0.1:$port --max-concurrency 64 --num-prompts 128 --input-len 128 \
    --output-len 64 --seed 1 > $OUT/bench_tp$tp.log 2>&1; say "bench serve tp=$tp rc=$?"
  grep -iE 'throughput|req/s|tok/s|TTFT|TPOT|ITL|\|' $OUT/bench_tp$tp.log | head -14 | tee -a $S
  kill $sp 2>/dev/null; wait $sp 2>/dev/null
done
say "total $(( $(date +%s) - T0 )) s"
