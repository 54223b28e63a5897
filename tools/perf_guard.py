#!/usr/bin/env python3
"""Memory and latency guard of the bundled tiny model, against committed baselines (bench/baselines.json).

Figures (each with a relative tolerance in the baselines file):
  generate_peak_rss_mib    peak RSS of `tritium generate` (32 tokens, 1 thread), from its own report
  serve_peak_rss_mib       peak RSS (VmHWM) of `tritium serve` (64 MiB KV pool, 1 thread) after 8 requests
  decode_instructions_per_token
                           instructions per decoded token under valgrind's cachegrind, on the AVX2 kernel path:
                           (instructions of 24 decoded tokens - those of 8) / 16, so loading and prefill cancel.
                           Instruction counts do not depend on the machine's load, unlike times.
Baselines are kept per build flavor ("cpu", or "cuda" for a binary linked with the CUDA runtime, whose libraries
add to the resident set); a flavor without a baseline is skipped (exit 77).
Usage:
  perf_guard.py check BINARY      measures and fails (exit 1) on a figure outside its tolerance
  perf_guard.py update BINARY     measures and rewrites bench/baselines.json (when a change is meant)
  perf_guard.py self-test BINARY  plants a regression (the scalar kernel path; the server holding the same model
                                  with a float32 head and int8 ternary weights, ~10 MiB more) and passes only when
                                  check reports both
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BASELINES = os.path.join(ROOT, "bench", "baselines.json")
PROMPT = "Once upon a time"


def generate_rss(binary, env=None):
    r = subprocess.run([binary, "generate", "-p", PROMPT, "-n", "32", "--temp", "0", "-t", "1", "--ignore-eos"],
                       capture_output=True, text=True, env=env, timeout=300, check=True)
    m = re.search(r"peak RSS: ([0-9.]+) MiB", r.stderr)
    if not m:
        raise RuntimeError("generate printed no peak RSS: " + r.stderr[-500:])
    return float(m.group(1))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_rss(binary, extra=()):
    port = free_port()
    p = subprocess.Popen([binary, "serve", "-t", "1", "--port", str(port), "--kv-cache-memory", "64MiB", *extra],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1)
                break
            except Exception:
                time.sleep(0.1)
        body = json.dumps({"prompt": PROMPT, "max_tokens": 16, "temperature": 0, "ignore_eos": True}).encode()
        for _ in range(8):
            req = urllib.request.Request(base + "/v1/completions", body, {"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=60).read()
        with open(f"/proc/{p.pid}/status") as f:
            hwm = next(line for line in f if line.startswith("VmHWM:"))
        return int(hwm.split()[1]) / 1024.0
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def instructions(binary, n, kernel):
    env = dict(os.environ, TRITIUM_KERNEL=kernel)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}", binary,
                        "generate", "-p", PROMPT, "-n", str(n), "--temp", "0", "-t", "1", "--ignore-eos"],
                       capture_output=True, env=env, timeout=600, check=True)
        with open(out) as f:
            for line in f:
                if line.startswith("summary:"):
                    return int(line.split()[1])
    raise RuntimeError("cachegrind wrote no summary")


def measure(binary, planted=False):
    kernel = "ref" if planted else "avx2"
    return {
        "generate_peak_rss_mib": generate_rss(binary),
        "serve_peak_rss_mib": serve_rss(binary, ("--lm-head", "f32", "--weights", "int8") if planted else ()),
        "decode_instructions_per_token": (instructions(binary, 24, kernel) - instructions(binary, 8, kernel)) / 16,
    }


def flavor(binary):
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    return "cuda" if "libcudart" in ldd else "cpu"


def compare(got, base):
    bad = []
    for key, b in base["figures"].items():
        v, want, tol = got[key], b["value"], b["tolerance"]
        rel = (v - want) / want
        ok = abs(rel) <= tol
        print(f"{key}: {v:.1f} (baseline {want:.1f}, {rel:+.2%}, tolerance {tol:.0%}) {'ok' if ok else 'OUT OF RANGE'}")
        if not ok:
            bad.append(key)
    return bad


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "update", "self-test"):
        print(__doc__)
        return 2
    mode, binary = sys.argv[1], sys.argv[2]
    fl = flavor(binary)
    all_base = {}
    if os.path.exists(BASELINES):
        with open(BASELINES) as f:
            all_base = json.load(f)
    if mode == "update":
        got = measure(binary)
        all_base["about"] = ("tools/perf_guard.py: the bundled tiny-bitnet, 1 thread, per build flavor; update only "
                             "for a meant change")
        old = all_base.get(fl, {}).get("figures", {})

        def tol(key, default):  # a tolerance set by hand in the file is kept
            return old.get(key, {}).get("tolerance", default)
        all_base[fl] = {"figures": {
            "generate_peak_rss_mib": {"value": round(got["generate_peak_rss_mib"], 1),
                                      "tolerance": tol("generate_peak_rss_mib", 0.05)},
            "serve_peak_rss_mib": {"value": round(got["serve_peak_rss_mib"], 1),
                                   "tolerance": tol("serve_peak_rss_mib", 0.05)},
            "decode_instructions_per_token": {"value": round(got["decode_instructions_per_token"]),
                                              "tolerance": tol("decode_instructions_per_token", 0.03)}}}
        with open(BASELINES, "w") as f:
            json.dump(all_base, f, indent=2)
            f.write("\n")
        print(json.dumps(all_base[fl], indent=2))
        return 0
    if fl not in all_base:
        print(f"perf guard: no baseline for {fl} builds in bench/baselines.json (tools/perf_guard.py update BINARY)")
        return 77
    base = all_base[fl]
    if mode == "check":
        bad = compare(measure(binary), base)
        if bad:
            print("perf guard: outside the baselines: " + ", ".join(bad) +
                  " (a meant change: tools/perf_guard.py update BINARY, and commit bench/baselines.json)")
            return 1
        print("perf guard: all figures within their baselines")
        return 0
    bad = compare(measure(binary, planted=True), base)
    ok = "decode_instructions_per_token" in bad and "serve_peak_rss_mib" in bad
    print("perf guard self-test: planted regressions " + ("reported" if ok else "NOT reported"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
