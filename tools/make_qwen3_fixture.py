#!/usr/bin/env python3
"""Writes small Qwen3ForCausalLM checkpoints and their Hugging Face goldens (the oracle for tritium's qwen3
architecture), with transformers' own Qwen3 code. Run on a machine with torch and transformers (the device).

Two seeded random models, small enough for tests/data (vocab 1024, bf16), with weights large enough that greedy
steps are not near ties, and every norm weight drawn around 1 so that a skipped or misplaced norm shows:
- qwen3-a: hidden 96, 4 heads / 2 KV heads, head_dim 32 (unlike hidden / heads = 24: Qwen3 states it), 3 layers,
  tied embeddings, no biases;
- qwen3-b: hidden 128, 4 / 4 heads, head_dim 32, 2 layers, untied lm_head, attention_bias true (q/k/v/o biases).

For each: OUT/<name>/ (config.json, model.safetensors, generation_config.json) and OUT/<name>.golden.json:
for each prompt (seeded token ids, no tokenizer): input_ids, greedy_ids (24 new tokens, greedy, float32 eager),
the top-1 / top-2 logit gap of each greedy step, and the logits of the last prompt position; plus
OUT/<name>.logits.safetensors (logits_i float32 [T, vocab] of prompt i).

Usage: make_qwen3_fixture.py OUT_DIR [cuda|cpu]
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
import transformers
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

NEW_TOKENS = 24
PROMPT_LENGTHS = (5, 11, 19)

CONFIGS = {
    "qwen3-a": dict(vocab_size=1024, hidden_size=96, intermediate_size=192, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True,
                    attention_bias=False, rms_norm_eps=1e-6,
                    rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, seed=11),
    "qwen3-b": dict(vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, head_dim=32, tie_word_embeddings=False,
                    attention_bias=True, rms_norm_eps=1e-5,
                    rope_parameters={"rope_type": "default", "rope_theta": 10000.0}, seed=12),
}


def build(name, out):
    kw = dict(CONFIGS[name])
    seed = kw.pop("seed")
    cfg = Qwen3Config(max_position_embeddings=512, initializer_range=0.15, bos_token_id=0, eos_token_id=1, **kw)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.25 * torch.randn_like(p))
            elif n.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(folder)
    return folder


def golden(name, folder, out, device):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    g = torch.Generator().manual_seed(7)
    res = {"model": name, "source": f"transformers {transformers.__version__} Qwen3ForCausalLM, float32 eager, {device}",
           "prompts": []}
    logits = {}
    with torch.no_grad():
        for i, n in enumerate(PROMPT_LENGTHS):
            ids = [0] + torch.randint(2, 1024, (n - 1,), generator=g).tolist()
            x = torch.tensor([ids], device=device)
            lg = model(x).logits[0].float()
            logits[f"logits_{i}"] = lg.cpu().contiguous()
            greedy, gaps = [], []
            for _ in range(NEW_TOKENS):
                t2 = torch.topk(model(x).logits[0, -1].float(), 2)
                greedy.append(int(t2.indices[0]))
                gaps.append(round(float(t2.values[0] - t2.values[1]), 6))
                x = torch.cat([x, t2.indices[:1].view(1, 1)], dim=1)
            res["prompts"].append({"input_ids": ids, "greedy_ids": greedy, "greedy_top2_gap": gaps})
    with open(os.path.join(out, name + ".golden.json"), "w") as f:
        json.dump(res, f, indent=1)
    save_file(logits, os.path.join(out, name + ".logits.safetensors"))


def main():
    out = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else ("cuda" if torch.cuda.is_available() else "cpu")
    os.makedirs(out, exist_ok=True)
    for name in CONFIGS:
        golden(name, build(name, out), out, device)
        print(name, "written")


if __name__ == "__main__":
    main()
