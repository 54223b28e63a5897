#!/usr/bin/env python3
"""Compares a `tritium eval --json` result with tools/eval_oracle.py output, example by example.

Usage: python3 tools/compare_eval_oracle.py tritium.json oracle.json MODEL_NAME [--tol 1e-3]
Prints per task: documents, largest |ll - oracle ll|, requests over the tolerance, and acc / acc_norm of both.
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tritium")
    ap.add_argument("oracle")
    ap.add_argument("model")
    ap.add_argument("--tol", type=float, default=1e-3)
    a = ap.parse_args()
    t = json.load(open(a.tritium))["tasks"]
    o = json.load(open(a.oracle))["models"][a.model]["tasks"]
    print("| task | n | max abs diff ll | requests > %g | acc tritium / oracle | acc_norm tritium / oracle |" % a.tol)
    print("|---|---:|---:|---:|---|---|")
    for task, r in t.items():
        if task not in o:
            continue
        ol = o[task]["ll"]
        tl = r["examples"]["ll"]
        n = min(len(ol), len(tl))
        diffs = [abs(x - y) for i in range(n) for x, y in zip(tl[i], ol[i])]
        over = sum(d > a.tol for d in diffs)
        m = r["metrics"]
        acc = "%.4f / %.4f" % (m["acc"]["value"], o[task]["acc"])
        accn = ("%.4f / %.4f" % (m["acc_norm"]["value"], o[task]["acc_norm"])) if "acc_norm" in m else "-"
        print("| %s | %d | %.2e | %d of %d | %s | %s |" % (task, n, max(diffs), over, len(diffs), acc, accn))


if __name__ == "__main__":
    main()
