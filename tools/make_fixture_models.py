#!/usr/bin/env python3
"""Writes small seeded checkpoints and their Hugging Face goldens (greedy ids, top-2 gaps, logits) with
transformers' own model code. Run on a machine with torch and transformers (the device).

- qwen3-a: Qwen3ForCausalLM bf16, hidden 96, 4 / 2 heads, head_dim 32 (not hidden / heads), 3 layers, tied.
- qwen3-b: Qwen3ForCausalLM bf16, hidden 128, 4 / 4 heads, head_dim 64 (q width 256), 2 layers, untied, attention_bias.
- qwen3-t: Ternary Bonsai style Qwen3 bf16 (4 / 2 heads, head_dim 64): every projection, the head and the embedding hold (c - 1) * d with
  c in {0, 1, 2} and one scale d per group of 128 consecutive weights of a row (d exact in bf16 and fp16).
- trilm-a: TriLM style LlamaForCausalLM fp16 (2 / 1 heads of 64): every projection holds {-s, 0, +s} with one s per tensor.

- falcon-a: Falcon3-1.58bit style LlamaForCausalLM with quantization_config {quant_method: bitnet} (transformers'
  BitLinear: weights packed four 2-bit codes per byte along the output dimension, one weight_scale per tensor that
  divides, activations absmax int8 per token); 2 / 1 heads of 64.

Writes OUT/models/<name>/ (config.json, model.safetensors, generation_config.json), OUT/golden/<name>.json (per
prompt of seeded token ids: input_ids, 24 greedy ids, the top-1 / top-2 gap of each greedy step, the mean NLL of
prompt + continuation) and OUT/golden/<name>.logits.safetensors (logits_i float32 [T, vocab] of prompt i); OUT is
tests/data. Usage: make_fixture_models.py OUT_DIR [cuda|cpu]
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file
import transformers
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

NEW_TOKENS = 24
PROMPT_LENGTHS = (5, 11, 19)
ROPE = lambda theta: {"rope_type": "default", "rope_theta": theta}

CONFIGS = {
    "qwen3-a": dict(arch="qwen3", vocab_size=1024, hidden_size=96, intermediate_size=192, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=32, tie_word_embeddings=True,
                    attention_bias=False, rms_norm_eps=1e-6, rope_parameters=ROPE(1000000.0), seed=11),
    "qwen3-b": dict(arch="qwen3", vocab_size=1024, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, head_dim=64, tie_word_embeddings=False,
                    attention_bias=True, rms_norm_eps=1e-5, rope_parameters=ROPE(10000.0), seed=12),
    "qwen3-t": dict(arch="qwen3", vocab_size=1024, hidden_size=128, intermediate_size=384, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=64, tie_word_embeddings=False,
                    attention_bias=False, rms_norm_eps=1e-6, rope_parameters=ROPE(1000000.0), seed=13,
                    ternary="group128"),
    "trilm-a": dict(arch="llama", vocab_size=1024, hidden_size=128, intermediate_size=320, num_hidden_layers=2,
                    num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False, rms_norm_eps=1e-5,
                    rope_parameters=ROPE(10000.0), seed=14, ternary="tensor", dtype="float16"),
}


def exact_scale(x):
    # a positive scale exact in both bf16 and fp16 (8 significant bits, well inside fp16's normal range)
    return x.abs().clamp(min=2 ** -10).to(torch.bfloat16).float()


def ternary_group128(w, gen):
    out_f, in_f = w.shape
    codes = torch.randint(0, 3, (out_f, in_f), generator=gen).float() - 1.0
    codes[torch.rand(out_f, in_f, generator=gen) < 0.1] = 0.0   # zero density near 0.4
    d = exact_scale(0.12 + 0.05 * torch.randn(out_f, in_f // 128, generator=gen))
    return codes * d.repeat_interleave(128, dim=1)


def ternary_tensor(w, gen):
    codes = torch.randint(0, 3, w.shape, generator=gen).float() - 1.0
    s = exact_scale(torch.tensor(0.11 + 0.04 * torch.rand(1, generator=gen).item()))
    return codes * s


def build(name, out):
    kw = dict(CONFIGS[name])
    arch, seed = kw.pop("arch"), kw.pop("seed")
    mode, dtype = kw.pop("ternary", None), getattr(torch, kw.pop("dtype", "bfloat16"))
    common = dict(max_position_embeddings=512, initializer_range=0.15, bos_token_id=0, eos_token_id=1)
    cfg = (Qwen3Config if arch == "qwen3" else LlamaConfig)(**common, **kw)
    torch.manual_seed(seed)
    model = (Qwen3ForCausalLM if arch == "qwen3" else LlamaForCausalLM)(cfg)
    gen = torch.Generator().manual_seed(seed + 100)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.25 * torch.randn_like(p))
            elif n.endswith(".bias"):
                p.copy_(0.1 * torch.randn_like(p))
            elif mode and p.dim() == 2:
                is_proj = "proj" in n
                if mode == "group128" and (is_proj or "embed_tokens" in n or "lm_head" in n):
                    p.copy_(ternary_group128(p, gen))
                elif mode == "tensor" and is_proj:
                    p.copy_(ternary_tensor(p, gen))
    folder = os.path.join(out, "models", name)
    os.makedirs(folder, exist_ok=True)
    model.to(dtype).save_pretrained(folder)
    return folder


def build_falcon(name, out):
    from safetensors.torch import save_file as save
    from transformers.integrations.bitnet import pack_weights
    cfg = LlamaConfig(vocab_size=1024, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False, rms_norm_eps=1e-5,
                      rope_parameters=ROPE(10000.0), max_position_embeddings=512, initializer_range=0.15,
                      bos_token_id=0, eos_token_id=1)
    torch.manual_seed(15)
    model = LlamaForCausalLM(cfg)
    sd = {}
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("norm.weight"):
                p.copy_(1.0 + 0.25 * torch.randn_like(p))
            if "proj" in n:
                s = p.abs().mean().clamp(min=1e-5)
                q = (p / s).round().clamp(-1, 1)
                sd[n] = pack_weights(q.clone().to(torch.int8))
                sd[n.replace(".weight", ".weight_scale")] = (1.0 / s).reshape(1).to(torch.bfloat16)
            else:
                sd[n] = p.detach().to(torch.bfloat16).contiguous()
    folder = os.path.join(out, "models", name)
    os.makedirs(folder, exist_ok=True)
    save({k: v.contiguous() for k, v in sd.items()}, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    j = cfg.to_dict()
    j["architectures"] = ["LlamaForCausalLM"]
    j["torch_dtype"] = "bfloat16"
    j["quantization_config"] = {"quant_method": "bitnet", "modules_to_not_convert": None}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(j, f, indent=1)
    return folder


def golden(name, folder, out, device):
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    g = torch.Generator().manual_seed(7)
    res = {"model": name, "source": f"transformers {transformers.__version__} {type(model).__name__}, float32 eager, {device}",
           "prompts": []}
    logits = {}
    with torch.no_grad():
        for i, n in enumerate(PROMPT_LENGTHS):
            ids = [0] + torch.randint(2, 1024, (n - 1,), generator=g).tolist()
            x = torch.tensor([ids], device=device)
            logits[f"logits_{i}"] = model(x).logits[0].float().cpu().contiguous()
            greedy, gaps = [], []
            for _ in range(NEW_TOKENS):
                t2 = torch.topk(model(x).logits[0, -1].float(), 2)
                greedy.append(int(t2.indices[0]))
                gaps.append(round(float(t2.values[0] - t2.values[1]), 6))
                x = torch.cat([x, t2.indices[:1].view(1, 1)], dim=1)
            # the whole sequence's logits too: a perplexity over prompt + greedy continuation
            full = model(x).logits[0].float()
            nll = torch.nn.functional.cross_entropy(full[:-1], x[0, 1:]).item()
            res["prompts"].append({"input_ids": ids, "greedy_ids": greedy, "greedy_top2_gap": gaps,
                                   "sequence_mean_nll": round(nll, 6)})
    os.makedirs(os.path.join(out, "golden"), exist_ok=True)
    with open(os.path.join(out, "golden", name + ".json"), "w") as f:
        json.dump(res, f, indent=1)
    save_file(logits, os.path.join(out, "golden", name + ".logits.safetensors"))


def main():
    out = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else ("cuda" if torch.cuda.is_available() else "cpu")
    os.makedirs(out, exist_ok=True)
    for name in CONFIGS:
        golden(name, build(name, out), out, device)
        print(name, "written", flush=True)
    try:
        golden("falcon-a", build_falcon("falcon-a", out), out, device)
        print("falcon-a written", flush=True)
    except Exception:
        import traceback
        traceback.print_exc()


if __name__ == "__main__":
    main()
