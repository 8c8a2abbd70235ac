#!/usr/bin/env python3
"""Fails when a CPU kernel's inner loop keeps its accumulators on the stack.

A few-row kernel holds R x V vector accumulators. When GCC cannot prove every index constant
(an epilogue loop over r without `#pragma GCC unroll`, a lambda capturing the array) it keeps
the array in memory and stores all of it on every step: the 8-row f16 pass ran store-bound at
2.2x a one-row pass that way, W8A16's 4-row row stream at 1.5x (2026-12-06, docs/kernels.md
"Accumulators in registers"). This reads the release library's machine code (objdump) and, for
every innermost loop of a function in inferlab::cpu that does vector multiply-adds (FMA,
vpdpbusd, vdpbf16ps), counts the vector registers it stores to the stack per pass. More than
--max-stores (9) in one loop is a failure, naming the function: the defect above stored 12-18
per loop at the row counts where it cost most (4-8 rows); a few are register pressure or a
rarely run remainder loop (GCC 12: 6 in the W8A8 6-row tile's partial-block loop). The K-quant
row kernel's 4-row form stored 9 (AMX Xeon) and 10 (Zen 4) a block, a block's 8 chunks of codes
and scales held across the rows, until it took each chunk into every row at once (2026-12-07).

Exit 77 (a ctest skip) when the library has no AVX-512 code (a portable or non-x86 build: the
spills this catches are of zmm accumulators) or objdump is missing.
"""
import argparse
import re
import shutil
import subprocess
import sys

FUNC = re.compile(r"\n(?=[0-9a-f]+ <)")
INSN = re.compile(r"\s*([0-9a-f]+):\s+(.*)")
JUMP = re.compile(r"j\w+\s+([0-9a-f]+)\b")
STACK_STORE = re.compile(r"vmov\w*\s+%[xyz]mm\d+,[^,]*\((%rsp|%rbp)\)")
MULTIPLY_ADD = re.compile(r"vfn?madd|vpdpbusd|vpdpwssd|vdpbf16ps")


def innermost_loops(lines):
    """(start, end) address pairs of backward jumps that contain no other backward jump."""
    loops = []
    for addr, insn in lines:
        m = JUMP.match(insn)
        if m and int(m.group(1), 16) < addr:
            loops.append((int(m.group(1), 16), addr))
    return [(t, a) for t, a in loops
            if not any(t <= t2 and a2 <= a and (t2, a2) != (t, a) for t2, a2 in loops)]


def scan(disassembly, max_stores):
    problems, kernels, zmm = [], 0, "%zmm" in disassembly
    for func in FUNC.split(disassembly):
        head = func.split("\n", 1)[0]
        if "inferlab::cpu::" not in head:
            continue
        lines = [(int(m.group(1), 16), m.group(2)) for m in map(INSN.match, func.split("\n")[1:]) if m]
        name = head[head.find("<") + 1:head.rfind(">:")]
        counted = False
        for start, end in innermost_loops(lines):
            body = [i for a, i in lines if start <= a <= end]
            if sum(1 for i in body if MULTIPLY_ADD.search(i)) < 4:
                continue
            counted = True
            stores = sum(1 for i in body if STACK_STORE.match(i))
            if stores > max_stores:
                problems.append(f"{stores} vector stores to the stack per pass of a {len(body)}-instruction loop in {name}")
        kernels += counted
    return problems, kernels, zmm


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lib", required=True, help="the release build's libinferlab_core.so")
    p.add_argument("--max-stores", type=int, default=9)
    args = p.parse_args()
    objdump = shutil.which("objdump")
    if objdump is None:
        print("check_spills: skipped: objdump not found")
        return 77
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", "-C", args.lib], capture_output=True, text=True)
    if out.returncode != 0:
        print(f"check_spills: objdump failed on {args.lib}: {out.stderr.strip()}")
        return 1
    problems, kernels, zmm = scan(out.stdout, args.max_stores)
    if not zmm:
        print(f"check_spills: skipped: {args.lib} has no AVX-512 code (a portable or non-x86 build)")
        return 77
    if kernels == 0:
        print(f"check_spills: no multiply-add loop found in {args.lib}'s inferlab::cpu functions")
        return 1
    for line in problems:
        print("check_spills: " + line)
    print(f"check_spills: {kernels} kernel functions' inner loops, {len(problems)} over {args.max_stores} stack stores")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
