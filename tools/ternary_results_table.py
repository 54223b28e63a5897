#!/usr/bin/env python3
"""Turns bench_ternary_kernels JSON output (--benchmark_out, with repetitions + aggregates) into the
markdown tables of bench/RESULTS.md. Usage: ternary_results_table.py t2.json [t1.json ...]"""
import json
import sys


def load(path):
    rows = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].replace("/real_time", "")
        rows[name] = b
    return rows


def main():
    for path in sys.argv[1:]:
        rows = load(path)
        threads = next(iter(rows)).split("/t")[-1]
        bw = {n.split("/")[1]: r["read_GBps"] / 1e9 if r["read_GBps"] > 1e3 else r["read_GBps"]
              for n, r in rows.items() if n.startswith("readbw/")}
        best_bw = max(bw.values())
        print(f"\n#### {threads} thread(s): measured read bandwidth (1 GiB sum) "
              + ", ".join(f"{k} {v:.1f} GB/s" for k, v in bw.items()) + "\n")
        print("| kernel | N x K | z | format | bits/w | time (us) | weight GB/s | % of read BW | tok/s | speed vs i2 | GB/s by CPU time |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        i2_time = {}
        for n, r in rows.items():
            p = n.split("/")
            if p[0] != "readbw" and p[1] == "i2":
                i2_time[(p[0], p[2], p[3])] = r["real_time"]
        for n, r in rows.items():
            p = n.split("/")
            if p[0] == "readbw":
                continue
            gbps = r["weight_GBps"]
            gbps = gbps / 1e9 if gbps > 1e3 else gbps
            t = r["real_time"]
            ratio = i2_time[(p[0], p[2], p[3])] / t
            print(f"| {p[0]} | {p[2]} | {p[3][1:]} | {p[1]} | {r['bits_per_w']:.3f} | {t:.0f} | {gbps:.2f} | "
                  f"{100 * gbps / best_bw:.0f}% | {r['tok_per_s']:.0f} | {ratio:.2f}x | {gbps * t / r['cpu_time']:.2f} |")


if __name__ == "__main__":
    main()
