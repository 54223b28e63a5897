#!/usr/bin/env python3
"""Shrinks eval_oracle.py output into the CI golden tests/data/eval/oracle_golden.json.

Keeps, per model and task, the per-request loglikelihoods (rounded to 1e-6), the greedy flags of lambada and
the oracle's acc / acc_norm / ppl; the rolling-perplexity result; and from an --add-bos oracle run the copa
loglikelihoods (to test the BOS option).
Usage: python3 tools/make_eval_golden.py oracle.json oracle_bos.json tests/data/eval/oracle_golden.json
"""
import json
import sys


def main():
    src, src_bos, dst = sys.argv[1:4]
    o = json.load(open(src))
    ob = json.load(open(src_bos))
    out = {"source": "tools/eval_oracle.py, transformers %s, torch %s, float32 eager on %s, limit %d"
                     % (o["transformers"], o["torch"], o["device"], o["limit"]),
           "models": {}}
    for name, m in o["models"].items():
        g = {"max_length": m["max_length"], "tasks": {}}
        for task, r in m["tasks"].items():
            t = {"n": r["n"], "acc": r["acc"], "ll": [[round(x, 6) for x in d] for d in r["ll"]]}
            if "acc_norm" in r:
                t["acc_norm"] = r["acc_norm"]
            if "ppl" in r:
                t["ppl"] = r["ppl"]
                t["greedy"] = [int(d[0]) for d in r["greedy"]]
            g["tasks"][task] = t
        if "rolling" in m:
            g["rolling"] = m["rolling"]
        bos = ob["models"][name]["tasks"]["copa"]
        g["copa_add_bos"] = {"acc": bos["acc"], "acc_norm": bos["acc_norm"],
                             "ll": [[round(x, 6) for x in d] for d in bos["ll"]]}
        out["models"][name] = g
    with open(dst, "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
