#!/usr/bin/env bash
# The one device runner: `bash bench/device/run.sh SUITE...` from the repository root on the GPU machine, with
# .device/payload.tar.xz carried (bench/device/pack.sh builds it here; DEVICE_DIR names another folder holding
# it). Writes each suite's log and a summary into $OUT. Every step has a timeout, so a hung step costs its limit,
# not the lease.
#   test     the CUDA tests and the backend harness (every backend against the CPU reference; TEST_FILTER: others), and
#            compute-sanitizer memcheck on the kernel, sampler and harness tests (MEMCHECK_FILTER: other tests)
#   kernels  cuda-bench --kernels --int8-kernels: GEMV/GEMM of both ternary layouts and int8 against cuBLAS bf16
#            and the copy bandwidth measured in the same run (token counts KERNEL_BATCHES, default 1,4,16,512)
#   e2e      decode steps of a synthetic BitNet b1.58 2B4T (synth --shape bitnet-2b4t) at batch E2E_BATCHES (default
#            1,16,64), layouts E2E_LAYOUTS (default "tc2 tcb"), KV cache dtypes E2E_KV (default "f32 bf16")
#   serve    `tritium serve --device cuda --max-num-seqs 256` on the same model under `tritium bench serve` (128 in /
#            128 out, EOS ignored) at concurrency SERVE_C (default "1 16 64"), with SERVE_FLAGS added to serve
#   service  the service class of a 1.5B-class ternary model (synth --shape qwen2-1.5b): `serve` under `bench serve`
#            (128 in / 128 out) at concurrency SERVICE_C (default "16 32 64 128 256"); prints P99 TTFT, P99 TPOT, the
#            per-stream rate and the GPU memory in use, and the highest concurrency with P99 TTFT < 350 ms and
#            >= 22 tok/s per stream (median TPOT <= 45.45 ms)
#   bonsai   the group-scaled ternary kernel on the Qwen3-8B shapes (cuda-bench --grouped-kernels at
#            BONSAI_KERNEL_BATCHES), then a Ternary Bonsai 8B-shaped Qwen3 GGUF (synth --shape qwen3-8b): decode
#            steps at BONSAI_BATCHES (default 1,64,256) and `serve` under `bench serve` (128 / 128) at BONSAI_C
#            (default "1 64 256"), with the GPU memory in use
#   profile  Nsight Compute's GPU time per kernel over the first PROFILE_LAUNCHES (default 1500) launches of
#            one-token decode steps (cuda-bench --prompt 1) of PROFILE_MODEL (default the qwen3-8b shape of
#            `bonsai`), summed by kernel name with the share of the total
#   tp       tensor parallelism (needs 2 GPUs): the NCCL tests, greedy TP=1 vs TP=2, and a worker stopped (SIGSTOP)
#            while serving: the leader must answer with an error within TRITIUM_TP_TIMEOUT, not hang
# When the payload holds bin/tritium-base (pack.sh with BASE_BUILD set: the build before a change), e2e and serve
# run it first on the same machine, so before / after figures come from one run.
set -uo pipefail
R=$(pwd); D=${DEVICE_DIR:-$R/.device}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; S=$OUT/summary.txt; : > "$S"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
say() { echo "$*" | tee -a "$S"; }
T0=$(date +%s); el() { echo "($(( $(date +%s) - T0 )) s)"; }
(cd "$D" && tar -xJf payload.tar.xz) || { say "no .device/payload.tar.xz (bench/device/pack.sh, carry .device)"; exit 1; }
NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH=$D/lib:${NCCL_LIB:+$NCCL_LIB:}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export TRITIUM_TEST_DATA=$D/shared
TR=$D/bin/tritium; TT=$D/bin/tritium_tests; TB=$D/bin/tritium-base
BINS="new:$TR"; [ -x "$TB" ] && BINS="base:$TB $BINS"
# The tests look for the bundled model and fixtures in the source folder they were built in.
SRC=$(strings "$TT" | grep -m1 -oE '/[^ ]*/tests/data$' | sed 's#/tests/data$##')
if [ -n "$SRC" ] && [ ! -e "$SRC/models" ]; then mkdir -p "$SRC/tests" && ln -sfn "$R/models" "$SRC/models" && ln -sfn "$R/tests/data" "$SRC/tests/data"; fi
nvidia-smi -L | tee -a "$S"; date -u | tee -a "$S"; ldd "$TR" | grep "not found" | tee -a "$S"
SYN=/tmp/syn2b
synth() { [ -e $SYN/config.json ] || timeout 120 "$TR" synth --shape bitnet-2b4t -o $SYN > "$OUT/synth.log" 2>&1; }

for suite in "$@"; do
  case "$suite" in
  test)
    timeout 400 "$TT" --gtest_filter="${TEST_FILTER:-*Cuda*:Cuda*.*:Backends.*:DeviceSampling.*}" > "$OUT/test.log" 2>&1; say "cuda tests rc=$? $(el)"
    grep -E "^  \[cuda" "$OUT/test.log" | tee -a "$S"
    grep -E "^\[  (PASSED|FAILED)|FAILED|Failure|tests ran" "$OUT/test.log" | head -30 | tee -a "$S"
    timeout 300 compute-sanitizer --tool memcheck "$TT" --gtest_filter="${MEMCHECK_FILTER:-CudaKernels.*:CudaTc2.*:CudaTcb.*:CudaLayouts.TinyBitnet*:Backends.TinyBitnet*:CudaSampling.*:EngineRequests.DeviceSamplingMatchesHostSamplingCuda:EngineBatchInvariance.GreedyAloneVsConcurrentPrefixCachingAndPreemptionCuda}" \
      > "$OUT/memcheck.log" 2>&1; say "memcheck rc=$? $(el)"
    grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | head -5 | tee -a "$S"
    ;;
  kernels)
    timeout 240 "$TR" cuda-bench --kernels --int8-kernels --kernel-batches "${KERNEL_BATCHES:-1,4,16,512}" \
      > "$OUT/kernels.md" 2>&1; say "kernels rc=$? $(el)"
    grep -E "copy bandwidth|mma.sync ceiling|^\|" "$OUT/kernels.md" | head -160 | tee -a "$S"
    ;;
  e2e)
    synth; say "synth $(el)"
    for B in $BINS; do
      name=${B%%:*}; bin=${B#*:}
      for L in ${E2E_LAYOUTS:-tc2 tcb}; do
        for KV in ${E2E_KV:-f32 bf16}; do
          [ "$name" = base ] && [ "$L" = tcb ] && continue
          TRITIUM_CUDA_LAYOUT=$L timeout 150 "$bin" cuda-bench -m $SYN --batch "${E2E_BATCHES:-1,16,64}" --prompt 32 \
            --gen 64 -r 3 --kv-cache-dtype "$KV" > "$OUT/e2e_${name}_${L}_$KV.md" 2>&1
          say "e2e $name $L KV $KV rc=$? $(el)"
          grep -E "weights read|KV cache|^\| [0-9]|rror" "$OUT/e2e_${name}_${L}_$KV.md" | tee -a "$S"
        done
      done
    done
    ;;
  serve)
    synth; say "synth $(el)"
    for B in $BINS; do
      name=${B%%:*}; bin=${B#*:}
      # shellcheck disable=SC2086
      "$bin" serve -m $SYN --device cuda --port 8321 --max-num-seqs 256 ${SERVE_FLAGS:-} > "$OUT/serve_$name.log" 2>&1 &
      SP=$!
      for i in $(seq 1 120); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8321/health')" 2>/dev/null && break; sleep 1; done
      grep -m1 "KV cache" "$OUT/serve_$name.log" | tee -a "$S"
      for C in ${SERVE_C:-1 16 64}; do
        timeout 180 "$TR" bench serve --url http://127.0.0.1:8321 --max-concurrency $C --num-prompts $((C * 4)) \
          --input-len 128 --output-len 128 > "$OUT/serve_${name}_c$C.md" 2>&1
        say "bench serve $name c=$C rc=$? $(el)"
        grep -E "throughput|TPOT|TTFT|failed" "$OUT/serve_${name}_c$C.md" | head -12 | tee -a "$S"
        # The engine's step phases so far (cumulative over the concurrencies run on this server).
        python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8321/metrics').read().decode())" \
          2>/dev/null | grep -E "^tritium:engine_step" | tee -a "$S"
      done
      kill -TERM $SP; wait $SP; say "serve $name exit rc=$?"
    done
    ;;
  bonsai)
    # Ternary Bonsai 8B-shaped Qwen3 (synth --shape qwen3-8b: Q2_0 group-128 projections, head and embedding) on the
    # group-scaled ternary kernels: decode steps at BONSAI_BATCHES, then `serve` under `bench serve` at BONSAI_C.
    Q8=/tmp/q8b.gguf
    [ -e $Q8 ] || timeout 300 "$TR" synth --shape qwen3-8b --tokenizer "$D/shared/tokenizers/qwen3" -o $Q8 \
      > "$OUT/synth_q8.log" 2>&1; say "synth qwen3-8b rc=$? $(ls -la $Q8 | awk '{print $5}') bytes $(el)"
    timeout 200 "$TR" cuda-bench --grouped-kernels --kernel-batches "${BONSAI_KERNEL_BATCHES:-1,16,64,256}" \
      > "$OUT/bonsai_kernels.md" 2>&1; say "bonsai kernels rc=$? $(el)"
    grep -E "copy bandwidth|^\|" "$OUT/bonsai_kernels.md" | tee -a "$S"
    timeout 300 "$TR" cuda-bench -m $Q8 --batch "${BONSAI_BATCHES:-1,64,256}" --prompt 32 --gen 32 -r 3 \
      > "$OUT/bonsai_e2e.md" 2>&1; say "bonsai e2e rc=$? $(el)"
    grep -E "weights|GPU memory|KV cache|^\| [0-9]|rror" "$OUT/bonsai_e2e.md" | tee -a "$S"
    "$TR" serve -m $Q8 --device cuda --port 8322 --max-num-seqs 256 > "$OUT/bonsai_serve.log" 2>&1 &
    SP=$!
    for i in $(seq 1 240); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8322/health')" 2>/dev/null && break; sleep 1; done
    grep -m1 "KV cache" "$OUT/bonsai_serve.log" | tee -a "$S"
    nvidia-smi --query-gpu=memory.used --format=csv,noheader | sed 's/^/GPU memory used (server): /' | tee -a "$S"
    for C in ${BONSAI_C:-1 64 256}; do
      timeout 180 "$TR" bench serve --url http://127.0.0.1:8322 --max-concurrency $C --num-prompts $((C * 2 > 16 ? C * 2 : 16)) \
        --input-len 128 --output-len 128 > "$OUT/bonsai_serve_c$C.md" 2>&1
      say "bonsai bench serve c=$C rc=$? $(el)"
      grep -E "throughput|TPOT|TTFT|failed" "$OUT/bonsai_serve_c$C.md" | head -12 | tee -a "$S"
    done
    kill -TERM $SP; wait $SP; say "bonsai serve exit rc=$?"
    ;;
  service)
    Q=/tmp/q15
    [ -e $Q/config.json ] || timeout 200 "$TR" synth --shape qwen2-1.5b -o $Q > "$OUT/synth_q15.log" 2>&1
    say "synth qwen2-1.5b $(el)"
    "$TR" serve -m $Q --device cuda --port 8323 --max-num-seqs 256 > "$OUT/serve_q15.log" 2>&1 &
    SP=$!
    for i in $(seq 1 120); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8323/health')" 2>/dev/null && break; sleep 1; done
    grep -m1 "KV cache" "$OUT/serve_q15.log" | tee -a "$S"
    best=none
    for C in ${SERVICE_C:-16 32 64 128 256}; do
      timeout 150 "$TR" bench serve --url http://127.0.0.1:8323 --max-concurrency $C --num-prompts $((C * 4)) \
        --input-len 128 --output-len 128 > "$OUT/service_c$C.md" 2>&1
      ttft=$(grep -m1 "P99 TTFT" "$OUT/service_c$C.md" | awk '{print $NF}')
      tpot=$(grep -m1 "Median TPOT" "$OUT/service_c$C.md" | awk '{print $NF}')
      p99tpot=$(grep -m1 "P99 TPOT" "$OUT/service_c$C.md" | awk '{print $NF}')
      tput=$(grep -m1 "Output token throughput" "$OUT/service_c$C.md" | awk '{print $NF}')
      mem=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader | head -1)
      ok=$(python3 -c "print('meets' if float('${ttft:-1e9}') < 350 and 1000 / float('${tpot:-1e9}') >= 22 else 'misses')")
      say "service c=$C: output $tput tok/s, P99 TTFT $ttft ms, median TPOT $tpot ms ($(python3 -c "print(f'{1000 / float(\"${tpot:-1e9}\"):.1f}')") tok/s per stream), P99 TPOT $p99tpot ms, GPU memory $mem: $ok"
      [ "$ok" = meets ] && best=$C
    done
    say "service class: highest concurrency meeting P99 TTFT < 350 ms and >= 22 tok/s per stream: $best $(el)"
    kill -TERM $SP; wait $SP
    ;;
  profile)
    PM=${PROFILE_MODEL:-/tmp/q8b.gguf}
    [ -e "$PM" ] || timeout 300 "$TR" synth --shape qwen3-8b --tokenizer "$D/shared/tokenizers/qwen3" -o "$PM" \
      > "$OUT/synth_profile.log" 2>&1
    NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
    timeout 400 "$NCU" --metrics gpu__time_duration.sum --csv --print-units base -c "${PROFILE_LAUNCHES:-1500}" \
      "$TR" cuda-bench -m "$PM" --batch 1 --prompt 1 --gen 4 -r 1 > "$OUT/profile.csv" 2> "$OUT/profile.err"
    say "profile rc=$? $(el)"
    python3 - "$OUT/profile.csv" <<'PY' | tee -a "$S"
import csv, sys, collections
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
h = rows[0]; ki, vi = h.index("Kernel Name"), h.index("Metric Value")
t, n = collections.Counter(), collections.Counter()
for r in rows[1:]:
    name = r[ki].split("(")[0].split("<")[0].replace("void ", "")
    t[name] += float(r[vi].replace(",", "")); n[name] += 1
tot = sum(t.values())
print(f"profile: {sum(n.values())} launches, {tot / 1e3:.1f} us of GPU time")
for k, v in t.most_common(14):
    print(f"  {v / 1e3:10.1f} us {100 * v / tot:5.1f}%  {n[k]:5d} x {v / n[k] / 1e3:7.2f} us  {k}")
PY
    ;;
  tp)
    timeout 400 "$TT" --gtest_filter='TensorParallel*' > "$OUT/tp_tests.log" 2>&1; say "tp tests rc=$? $(el)"
    grep -E "^\[  (PASSED|FAILED)|FAILED|tp2 vs tp1|SKIP" "$OUT/tp_tests.log" | head -20 | tee -a "$S"
    synth
    for tp in 1 2; do
      timeout 120 "$TR" generate -m $SYN --device cuda --tensor-parallel $tp -p "The history of the city" -n 48 \
        --temp 0 > "$OUT/tp$tp.txt" 2> "$OUT/tp$tp.err"; say "generate tp=$tp rc=$? $(tail -1 "$OUT/tp$tp.err")"
    done
    cmp -s "$OUT/tp1.txt" "$OUT/tp2.txt" && say "greedy TP=1 vs TP=2: identical" || say "greedy TP=1 vs TP=2: DIFFER"
    # A worker that hangs (SIGSTOP) mid-serving: the leader must answer with an error within TRITIUM_TP_TIMEOUT
    # instead of hanging, and keep answering /health.
    TRITIUM_TP_TIMEOUT=5 "$TR" serve -m $SYN --device cuda --tensor-parallel 2 --port 8322 > "$OUT/tp_dead.log" 2>&1 &
    SP=$!
    for i in $(seq 1 120); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8322/health')" 2>/dev/null && break; sleep 1; done
    q() { python3 -c "import json,sys,time,urllib.request as u
t=time.time()
try:
  r=u.urlopen(u.Request('http://127.0.0.1:8322/v1/completions',json.dumps({'prompt':'Hello','max_tokens':8}).encode(),{'Content-Type':'application/json'}),timeout=60); print(r.status, end=' ')
except Exception as e: print(getattr(e,'code','no answer'), end=' ')
print(f'{time.time()-t:.1f} s')"; }
    say "tp dead worker: before: $(q)"
    W=$(pgrep -P $SP | head -1); kill -STOP "$W"
    say "tp dead worker: worker $W stopped, request: $(q) (want 500 within ~5 s)"
    say "tp dead worker: /health $(python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8322/health',timeout=5).status)" 2>&1 | tail -1)"
    kill -CONT "$W"; kill -TERM $SP; sleep 3; kill -KILL $SP "$W" 2>/dev/null
    grep -m2 "did not complete\|NCCL error" "$OUT/tp_dead.log" | tee -a "$S"
    ;;
  *) say "unknown suite '$suite' (test, kernels, e2e, serve, service, bonsai, profile, tp)" ;;
  esac
done
say "done $(el)"
