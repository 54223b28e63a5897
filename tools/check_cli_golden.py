#!/usr/bin/env python3
"""Runs `tritium generate` with default flags (plus any given) on every prompt of a golden file and compares the
prompt and greedy token ids with it; exit 1 when any differ. For devices where the C++ test suite's CPU-only
CliGolden tests do not reach the GPU, e.g.:

  tools/check_cli_golden.py build/tritium models/tiny-bitnet tests/data/golden/tiny-bitnet.json --device cuda
"""
import json
import subprocess
import sys


def main() -> int:
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    binary, model, golden_path, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    golden = json.load(open(golden_path))
    bad = 0
    for p in golden["prompts"]:
        want = p["greedy_ids"]
        r = subprocess.run([binary, "generate", "-m", model, "-p", p["text"], "-n", str(len(want)), "--temp", "0",
                            "--ignore-eos", "--token-ids", *extra], capture_output=True, text=True, timeout=600)
        line = next((l for l in r.stderr.splitlines() if l.startswith("token ids: ")), None)
        if r.returncode != 0 or line is None:
            print(f"error: exit {r.returncode}: {r.stderr.strip()[-400:]}")
            bad += 1
            continue
        ids = json.loads(line[len("token ids: "):])
        same = next((i for i, (a, b) in enumerate(zip(ids["generated"], want)) if a != b), min(len(want), len(ids["generated"])))
        ok = ids["prompt"] == p["input_ids"] and ids["generated"] == want
        bad += not ok
        print(f"{'ok  ' if ok else 'DIFF'} {same}/{len(want)} greedy ids equal  {p['text'][:50]!r}")
    print(f"{model} {' '.join(extra)}: {len(golden['prompts']) - bad} of {len(golden['prompts'])} prompts equal the golden")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
