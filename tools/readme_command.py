#!/usr/bin/env python3
"""Prints README.md's numbered command N (the N-th ```sh block, comment lines dropped), so that CI runs exactly
what a newcomer types.

  tools/readme_command.py 1            the command itself
  tools/readme_command.py --self-test  checks that scripts/test.sh runs command 1 through this tool and that
                                       command 1 configures, builds and runs the binary of the `build` folder
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def readme_command(n: int, text: str) -> str:
    blocks = re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)
    if n < 1 or n > len(blocks):
        raise SystemExit(f"readme_command: README.md has {len(blocks)} sh blocks, not {n}")
    lines = [l for l in blocks[n - 1].splitlines() if l.strip() and not l.lstrip().startswith("#")]
    if len(lines) != 1:
        raise SystemExit(f"readme_command: README command {n} must be one line, found {len(lines)}")
    return lines[0].strip()


def self_test() -> int:
    cmd1 = readme_command(1, (ROOT / "README.md").read_text())
    test_sh = (ROOT / "scripts/test.sh").read_text()
    errors = []
    if "tools/readme_command.py 1" not in test_sh:
        errors.append("scripts/test.sh does not run README command 1 through tools/readme_command.py")
    for part in ("cmake -S . -B build", "cmake --build build", "./build/tritium generate"):
        if part not in cmd1:
            errors.append(f"README command 1 lacks '{part}': {cmd1}")
    if "CMAKE_CUDA_ARCHITECTURES" in cmd1:
        errors.append("README command 1 must build the default CUDA architectures")
    cmd2 = readme_command(2, (ROOT / "README.md").read_text())
    if cmd2 != "scripts/test.sh":
        errors.append(f"README command 2 is '{cmd2}', CI runs scripts/test.sh")
    for e in errors:
        print("error:", e)
    print("readme_command self-test:", "ok" if not errors else f"{len(errors)} errors")
    return 1 if errors else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) != 2 or not sys.argv[1].isdigit():
        raise SystemExit(__doc__)
    print(readme_command(int(sys.argv[1]), (ROOT / "README.md").read_text()))
