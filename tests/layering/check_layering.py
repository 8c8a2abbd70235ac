#!/usr/bin/env python3
"""Checks the floors of the include graph (ctest `layering.core_includes`).

- nothing under core/ includes plugins/ (strategy code shared by plugins lives in
  plugins/common, which the core never links);
- no public header of the core (core/include/) includes a kernels/ header, so a plugin reading
  the core's headers sees no kernel;
- nothing under kernels/ includes the core: kernels see only the base library (base/include,
  whose headers are "inferlab/<name>.h" with no folder) and each other; base/ includes nothing of
  the project but itself;
- the core is in concept folders: no file directly in core/src or core/include/inferlab, no
  folder there of more than 20 files, no core source file over 600 lines.
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
MAX_FOLDER_FILES = 20
MAX_CORE_FILE_LINES = 600


def includes(root, folder):
    """(path relative to root, line number, included name) of every quoted include under folder."""
    for dirpath, _, names in os.walk(os.path.join(root, folder)):
        for name in sorted(names):
            if not name.endswith(SOURCE_EXTS):
                continue
            path = os.path.join(dirpath, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        yield os.path.relpath(path, root), number, m.group(1)


def base_headers(root):
    d = os.path.join(root, "base", "include", "inferlab")
    return {"inferlab/" + n for n in os.listdir(d)} if os.path.isdir(d) else set()


def floor_violations(root):
    """kernels/ and base/ include only what lies below them."""
    found = []
    allowed_base = base_headers(root)
    for folder, ok, why in (
        ("kernels", lambda inc: inc in allowed_base or inc.startswith("kernels/") or "/" not in inc,
         "kernels include only base/ (inferlab/<name>.h) and kernels/"),
        ("base", lambda inc: inc in allowed_base or "/" not in inc, "base includes only itself"),
    ):
        for path, number, inc in includes(root, folder):
            if not ok(inc):
                found.append(f"{path}:{number}: includes \"{inc}\": {why}")
    return found


def room_violations(root):
    """core/src and core/include/inferlab hold concept folders of at most 20 files, none over 600 lines."""
    found = []
    for top in ("core/src", "core/include/inferlab"):
        base = os.path.join(root, top)
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name)
            if os.path.isfile(path):
                found.append(f"{top}/{name}: a file outside the concept folders of {top}")
            elif len(os.listdir(path)) > MAX_FOLDER_FILES:
                found.append(f"{top}/{name}: {len(os.listdir(path))} files (at most {MAX_FOLDER_FILES})")
    for dirpath, _, names in os.walk(os.path.join(root, "core")):
        for name in sorted(names):
            if name.endswith(SOURCE_EXTS):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    n = sum(1 for _ in f)
                if n > MAX_CORE_FILE_LINES:
                    found.append(f"{os.path.relpath(path, root)}: {n} lines (at most {MAX_CORE_FILE_LINES} in core)")
    return found


def violations(root):
    found = []
    for folder, prefix, why in RULES:
        for path, number, inc in includes(root, folder):
            if inc.startswith(prefix):
                found.append(f"{path}:{number}: includes \"{inc}\": {why}")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    args = parser.parse_args()
    found = violations(args.root) + floor_violations(args.root) + room_violations(args.root)
    for v in found:
        print(v)
    if found:
        return 1
    print("ok: kernels and base include nothing above them, core no plugins/ file, core/include no kernels/ "
          "header; core in concept folders of <= 20 files, no core file over 600 lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
