#!/usr/bin/env python3
"""Prints, one absolute path a line, the C++ sources of core/, kernels/ and plugins/ whose code
depends on the target CPU: the file itself or a project header it includes (transitively, every
`#include "..."` whatever #if surrounds it) tests an instruction-set macro (__AVX2__, __F16C__,
...), includes <immintrin.h> or asks for a target attribute. These are the files -march changes;
every other file preprocesses to the same text on any x86-64.
The portable check build (cmake -DINFERLAB_PORTABLE_CHECK=ON, scripts/test.sh) compiles these at
full optimisation and the rest at -O0, only to link.
Usage: scripts/arch_dependent_sources.py [repository root]"""
import pathlib
import re
import sys

ARCH = re.compile(r"__(AVX|SSE|F16C|FMA|AMX|ARM_|x86_64)|[a-z0-9]*intrin\.h|__attribute__\s*\(\(\s*target")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent).resolve()
    search = [root, root / "core" / "include"]
    texts: dict[pathlib.Path, str] = {}
    arch: dict[pathlib.Path, bool] = {}

    def text(path: pathlib.Path) -> str:
        if path not in texts:
            texts[path] = path.read_text(errors="replace")
        return texts[path]

    def resolve(name: str, at: pathlib.Path) -> pathlib.Path | None:
        for base in [at.parent, *search]:
            candidate = (base / name).resolve()
            if candidate.is_file():
                return candidate
        return None  # a system header or a generated one: not the project's code

    def depends(path: pathlib.Path, visiting: set[pathlib.Path]) -> bool:
        if path in arch:
            return arch[path]
        visiting.add(path)
        found = bool(ARCH.search(text(path)))
        for name in INCLUDE.findall(text(path)):
            if found:
                break
            header = resolve(name, path)
            if header is not None and header not in visiting:
                found = depends(header, visiting)
        visiting.discard(path)
        arch[path] = found
        return found

    for top in ("core", "kernels", "plugins"):
        for source in sorted((root / top).rglob("*.cpp")):
            if depends(source.resolve(), set()):
                print(source.resolve())
    return 0


if __name__ == "__main__":
    sys.exit(main())
