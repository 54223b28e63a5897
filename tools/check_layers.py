#!/usr/bin/env python3
"""The layer rule of src/ (README, "Architecture"): a file may include headers of its own folder and of the
layers below its own; never a layer above, never a sibling of its rank, and no include cycle inside a folder.

Usage: check_layers.py [SRC]       checks SRC (default: the src/ beside this script); exit 1 on a violation.
       check_layers.py --self-test  plants an upward include and a cycle in a copy of src/ and checks that both
                                    are reported (exit 0 when they are).
"""
import os
import re
import shutil
import sys
import tempfile

# Bottom to top. Folders on one line share a rank: they may not include each other.
LAYERS = [
    ["core"],
    ["io", "tokenizer", "template", "grammar"],
    ["formats"],
    ["kernels/cpu", "kernels/cuda"],
    ["quant"],
    ["model"],
    ["kv"],
    ["parallel"],
    ["backend"],
    ["backend/cpu", "backend/cuda"],
    ["executor"],
    ["engine"],
    ["server", "eval", "bench"],
    ["cli"],
]
RANK = {d: r for r, ds in enumerate(LAYERS) for d in ds}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCE = (".h", ".cuh", ".cpp", ".cu")


def folder_of(rel):
    """The layer folder of a path relative to src/ (the longest listed prefix), or None."""
    parts = rel.split("/")[:-1]
    for n in range(len(parts), 0, -1):
        d = "/".join(parts[:n])
        if d in RANK:
            return d
    return None


def check(src):
    errors = []
    graph = {}
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith(SOURCE):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, src).replace(os.sep, "/")
            d = folder_of(rel)
            if d is None:
                errors.append(f"{rel}: its folder is in no layer (add it to LAYERS in tools/check_layers.py and README)")
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            graph[rel] = []
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                line = text.count("\n", 0, m.start()) + 1
                if "/" not in inc:
                    continue  # a header beside the file (same folder)
                if not os.path.exists(os.path.join(src, inc)):
                    continue  # not one of ours (a system or third-party header in quotes)
                di = folder_of(inc)
                if di == d:
                    graph[rel].append(inc)
                elif di is None or RANK[di] >= RANK[d]:
                    how = "a sibling of the same rank" if di and RANK[di] == RANK[d] else "a layer above"
                    errors.append(f"{rel}:{line}: includes \"{inc}\" ({di}), {how} of {d}")
    # Include cycles (only possible inside one folder, since ranks strictly decrease across folders).
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                errors.append("include cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return errors


def self_test():
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(here, "..", "src")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "src")
        shutil.copytree(src, copy)
        if check(copy):
            print("self-test: the unmodified tree already fails")
            return 1
        with open(os.path.join(copy, "core", "error.h"), "a") as f:
            f.write('\n#include "engine/engine.h"\n')
        errs = check(copy)
        if not any("core/error.h" in e and "engine/engine.h" in e for e in errs):
            print("self-test: the planted upward include core/error.h -> engine/engine.h was not reported")
            ok = False
        shutil.rmtree(copy)
        shutil.copytree(src, copy)
        with open(os.path.join(copy, "core", "dtype.h"), "a") as f:
            f.write('\n#include "core/error.h"\n')
        with open(os.path.join(copy, "core", "error.h"), "a") as f:
            f.write('\n#include "core/dtype.h"\n')
        if not any("include cycle" in e for e in check(copy)):
            print("self-test: the planted cycle core/error.h <-> core/dtype.h was not reported")
            ok = False
    print("self-test: planted violations reported" if ok else "self-test: FAILED")
    return 0 if ok else 1


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    errors = check(src)
    for e in errors:
        print(e)
    print(f"layering: {len(errors)} violation(s)" if errors else "layering: ok")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
