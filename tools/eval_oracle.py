#!/usr/bin/env python3
"""Reference ("oracle") zero-shot scoring with Hugging Face transformers, for `tritium eval`.

Runs the same tasks as `tritium eval` over the llm-foundry local jsonl files with exactly the request
construction and scoring of lm-evaluation-harness (HFLM, causal backend) and writes per-example
loglikelihoods as JSON, so that tritium's numbers can be compared example by example.

Definitions (lm-eval 0.4.x, lm_eval/api/task.py + lm_eval/models/huggingface.py):
  * multiple choice (piqa, arc_easy, arc_challenge, copa, boolq): one request (query, " " + choice) per
    choice (target delimiter " "); winogrande (partial scoring, multiple_input): one request
    (option_context, " " + continuation) per option.
  * lambada_openai: one request (context, " " + continuation).
  * _encode_pair: trailing whitespace of the context moves to the front of the continuation; whole =
    encode(context + continuation), ctx = encode(context), continuation tokens = whole[len(ctx):].
    encode() adds no special tokens (HFLM add_bos_token=False, the default for non-Gemma models);
    --add-bos mimics add_bos_token=True.
  * input = (ctx + cont)[-(max_length + 1):][:-1], max_length = config.max_position_embeddings;
    loglikelihood = sum of log_softmax at the continuation positions; is_greedy = every continuation token
    is the argmax.
  * acc = argmax(ll) == gold; acc_norm = argmax(ll / len(choice)) == gold, len in characters of the choice
    string (for winogrande the choices are the option contexts, as lm-eval's doc_to_choice returns them).
  * rolling loglikelihood (loglikelihood_rolling): lm_eval.utils.get_rolling_token_windows with
    prefix token = BOS (or EOS when the tokenizer has no BOS), context_len 1, max_seq_len = max_length,
    then make_disjoint_window.

Usage (on a machine with torch + transformers):
  python3 tools/eval_oracle.py --model DIR [--model DIR2 ...] --data DIR_WITH_JSONL --limit 200 \
      --out oracle.json [--rolling-text FILE --rolling-chars 20000]
The model is run in float32 with eager attention (the setting of the golden files in ../shared/golden).
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import transformers

TASKS = ["lambada_openai", "piqa", "winogrande", "arc_easy", "arc_challenge", "copa", "boolq"]


def load_docs(data_dir, task, limit):
    docs = []
    with open(os.path.join(data_dir, task + ".jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                docs.append(json.loads(line))
            if limit and len(docs) >= limit:
                break
    return docs


def build_requests(task, doc):
    """Returns (requests [(context, continuation)], choices for acc_norm, gold)."""
    if task == "lambada_openai":
        return [(doc["context"], " " + doc["continuation"])], None, 0
    if task == "winogrande":
        opts = doc["context_options"]
        return [(o, " " + doc["continuation"]) for o in opts], opts, int(doc["gold"])
    return [(doc["query"], " " + c) for c in doc["choices"]], doc["choices"], int(doc["gold"])


class Oracle:
    def __init__(self, model_dir, device, add_bos, dtype=torch.float32):
        self.tok = transformers.AutoTokenizer.from_pretrained(model_dir)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=dtype, attn_implementation="eager").to(device).eval()
        self.device = device
        self.add_bos = add_bos
        self.max_length = self.model.config.max_position_embeddings

    def encode(self, s):
        return self.tok.encode(s, add_special_tokens=self.add_bos)

    def encode_pair(self, context, continuation):
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces > 0:
            continuation = context[-n_spaces:] + continuation
            context = context[:-n_spaces]
        whole = self.encode(context + continuation)
        ctx = self.encode(context)
        return ctx, whole[len(ctx):]

    @torch.no_grad()
    def score_tokens(self, ctx, cont):
        full = (ctx + cont)[-(self.max_length + 1):]
        inp = full[:-1]
        x = torch.tensor([inp], device=self.device)
        logits = self.model(x).logits[0]
        if logits.dtype != torch.float64:
            logits = logits.float()
        lp = F.log_softmax(logits, dim=-1)
        n = len(cont)
        sel = lp[len(inp) - n:len(inp)]
        target = torch.tensor(cont, device=self.device)
        tok_lp = sel.gather(1, target[:, None])[:, 0].double()
        greedy = bool((sel.argmax(dim=-1) == target).all().item())
        return float(tok_lp.sum().item()), greedy

    def rolling(self, text):
        tokens = self.encode(text)
        prefix = self.tok.bos_token_id if self.tok.bos_token_id is not None else self.tok.eos_token_id
        L = self.max_length
        windows = []
        # lm_eval.utils.get_rolling_token_windows(context_len=1) + make_disjoint_window
        pred_len = L
        first = min(L, len(tokens))
        windows.append(([prefix] + tokens[:first - 1], tokens[:first]))
        predicted = first
        while predicted < len(tokens):
            wl = min(len(tokens) - predicted, pred_len)
            end = predicted + wl
            windows.append((tokens[end - L - 1:end - 1], tokens[end - wl:end]))
            predicted += wl
        total = 0.0
        per_window = []
        for a, b in windows:
            a = a[:len(a) - (len(b) - 1)]
            ll, _ = self.score_tokens(a, b)
            per_window.append(ll)
            total += ll
        return total, len(tokens), per_window


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", required=True, help="HF model folder (repeatable)")
    ap.add_argument("--data", required=True, help="folder with <task>.jsonl")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--add-bos", action="store_true")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"],
                    help="compute dtype (float64: a reference without float32 rounding, to measure how far float32 "
                         "implementations of the same model can drift apart)")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    ap.add_argument("--rolling-text", default=None, help="also score this text with loglikelihood_rolling")
    ap.add_argument("--rolling-chars", type=int, default=0, help="use only the first N characters")
    args = ap.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    out = {"transformers": transformers.__version__, "torch": torch.__version__, "device": args.device,
           "dtype": args.dtype,
           "add_bos": args.add_bos, "limit": args.limit, "models": {}}
    for mdir in args.model:
        name = os.path.basename(os.path.normpath(mdir))
        t0 = time.time()
        o = Oracle(mdir, args.device, args.add_bos, dtype)
        mres = {"max_length": o.max_length, "tasks": {}}
        for task in args.tasks.split(","):
            docs = load_docs(args.data, task, args.limit)
            lls, greedy, ntok = [], [], []
            acc = acc_norm = 0
            for doc in docs:
                reqs, choices, gold = build_requests(task, doc)
                dl, dg, dn = [], [], []
                for c, x in reqs:
                    ce, xe = o.encode_pair(c, x)
                    ll, g = o.score_tokens(ce, xe)
                    dl.append(ll)
                    dg.append(g)
                    dn.append(len(xe))
                lls.append(dl)
                greedy.append(dg)
                ntok.append(dn)
                if choices is None:
                    acc += int(dg[0])
                else:
                    pred = max(range(len(dl)), key=lambda i: (dl[i], -i))
                    norm = [dl[i] / len(choices[i]) for i in range(len(dl))]
                    pred_n = max(range(len(dl)), key=lambda i: (norm[i], -i))
                    acc += int(pred == gold)
                    acc_norm += int(pred_n == gold)
            n = len(docs)
            r = {"n": n, "ll": lls, "greedy": greedy, "ntok": ntok, "acc": acc / n}
            if task == "lambada_openai":
                r["ppl"] = math.exp(-sum(x[0] for x in lls) / n)
            else:
                r["acc_norm"] = acc_norm / n
            mres["tasks"][task] = r
            print(f"{name} {task}: n={n} acc={r['acc']:.4f} "
                  + (f"ppl={r['ppl']:.3f}" if "ppl" in r else f"acc_norm={r['acc_norm']:.4f}"), flush=True)
            out["models"][name] = mres
            with open(args.out, "w") as f:  # partial results survive a later failure
                json.dump(out, f)
        if args.rolling_text:
            with open(args.rolling_text, encoding="utf-8") as f:
                text = f.read()
            if args.rolling_chars:
                text = text[:args.rolling_chars]
            total, ntokens, per_window = o.rolling(text)
            mres["rolling"] = {"chars": len(text), "bytes": len(text.encode("utf-8")), "tokens": ntokens,
                               "loglikelihood": total, "windows": per_window}
            print(f"{name} rolling: tokens={ntokens} ll={total:.4f}", flush=True)
        mres["seconds"] = time.time() - t0
        out["models"][name] = mres
    with open(args.out, "w") as f:
        json.dump(out, f)
    print("wrote", args.out)


if __name__ == "__main__":
    sys.exit(main())
