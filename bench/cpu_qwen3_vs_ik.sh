#!/usr/bin/env bash
# CPU benchmark of a Ternary Bonsai-shaped model against ik_llama.cpp on the same machine, in one run:
#   1. `tritium synth --shape SHAPE` writes the Q2_0 GGUF (group-128 ternary projections, head and embedding) and
#      an F16 GGUF of the same weights; ik_llama.cpp's llama-quantize makes its IQ2_BN file from the F16 one;
#   2. ROUNDS rounds, alternating: `tritium bench` and `llama-bench` (pp512 / tg128, THREADS threads, 3
#      repetitions each), then the peak RSS of a `tritium generate` of 128 tokens against each file's size.
# Usage: bench/cpu_qwen3_vs_ik.sh TRITIUM IK_BUILD_BIN QWEN3_TOKENIZER_DIR [WORK_DIR]
#   (env SHAPE=qwen3-1.7b, THREADS=2, ROUNDS=2). Prints every figure and the medians with their ratios.
set -euo pipefail
TR=$1 IK=$2 TOK=$3 W=${4:-/tmp/bench-qwen3}
SHAPE=${SHAPE:-qwen3-1.7b} THREADS=${THREADS:-2} ROUNDS=${ROUNDS:-2}
mkdir -p "$W"
Q2=$W/$SHAPE-q2_0.gguf F16=$W/$SHAPE-f16.gguf IQ=$W/$SHAPE-iq2_bn.gguf
[ -e "$Q2" ] || "$TR" synth --shape "$SHAPE" --tokenizer "$TOK" -o "$Q2"
[ -e "$IQ" ] || { [ -e "$F16" ] || "$TR" synth --shape "$SHAPE" --tokenizer "$TOK" --type f16 -o "$F16";
                  "$IK/llama-quantize" "$F16" "$IQ" IQ2_BN > "$W/quantize.log" 2>&1; }
grep -E "type +[a-z0-9_]+: +[0-9]+ tensors|model size|quant size" "$W/quantize.log" | head -12 || true
for r in $(seq 1 "$ROUNDS"); do
  "$TR" bench -m "$Q2" -t "$THREADS" -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128" | sed "s/^/tritium round $r: /"
  "$IK/llama-bench" -m "$IQ" -t "$THREADS" -p 512 -n 128 -r 3 2>&1 | grep -E "pp512|tg128" | sed "s/^/ik_llama.cpp round $r: /"
done
"$TR" generate -m "$Q2" -p "Once upon a time" -n 128 --temp 0 -t "$THREADS" 2>&1 >/dev/null | tail -1 | sed 's/^/tritium generate: /'
ls -lL "$Q2" "$IQ" | awk '{printf "file %s: %.1f MiB\n", $NF, $5 / 1048576}'
