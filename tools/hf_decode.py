"""Decode throughput of Hugging Face transformers' BitNetForCausalLM (bf16, eager) on a model folder, for the
comparison in bench/RESULTS.md. Usage: python3 tools/hf_decode.py MODEL_DIR [GEN] [BATCH,...]
Prompt of 32 random tokens per sequence, then GEN greedy decode steps with the KV cache (3 warm-up steps first);
prints steps/s and tok/s per batch size."""
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM


def main():
    d = sys.argv[1]
    gen = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    batches = [int(b) for b in sys.argv[3].split(",")] if len(sys.argv) > 3 else [1, 16]
    model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16).cuda().eval()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for b in batches:
        ids = torch.randint(0, model.config.vocab_size, (b, 32), device="cuda")
        with torch.no_grad():
            out = model(ids, use_cache=True)
            past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            for _ in range(3):
                out = model(nxt, past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(gen):
                out = model(nxt, past_key_values=past, use_cache=True)
                past, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
            torch.cuda.synchronize()
            dt = time.perf_counter() - t
        print(f"| transformers bf16 eager | batch {b} | {gen / dt:.2f} steps/s | {b * gen / dt:.1f} tok/s |", flush=True)


if __name__ == "__main__":
    main()
