#!/usr/bin/env python3
"""Checks the floors of the include graph (ctest `layering.core_includes`).

- nothing under core/ includes plugins/ (strategy code shared by plugins lives in
  plugins/common, which the core never links);
- no public header of the core (core/include/) includes a kernels/ header, so a plugin reading
  the core's headers sees no kernel.
Prints each offending include as file:line and exits 1; exits 0 when there is none.
Usage: check_layering.py --root SRC
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# (folder under the root, include prefix it must not use, why)
RULES = [
    ("core", "plugins/", "the core must not include plugin code (plugins/common is linked by plugins only)"),
    ("core/include", "kernels/", "the core's public headers must not expose kernels"),
]
SOURCE_EXTS = (".h", ".hpp", ".cpp", ".cu", ".cuh")


def violations(root):
    found = []
    for folder, prefix, why in RULES:
        for dirpath, _, names in os.walk(os.path.join(root, folder)):
            for name in sorted(names):
                if not name.endswith(SOURCE_EXTS):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and m.group(1).startswith(prefix):
                            found.append(f"{os.path.relpath(path, root)}:{number}: includes \"{m.group(1)}\": {why}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    found = violations(args.root)
    for v in found:
        print(v)
    if found:
        return 1
    print("ok: core includes no plugins/ file and core/include no kernels/ header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
