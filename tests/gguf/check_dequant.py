#!/usr/bin/env python3
"""Bit-exact check of inferlab's GGML block dequantisation against the `gguf` Python package's.

Writes random blocks of every quantised type inferlab loads into one GGUF file (gguf.GGUFWriter),
dequantises each tensor with gguf.quants.dequantize and with inferlab's loader (the gguf_dump_f32
tool: GgufFile::read_f32), and requires the float32 bits to be equal (a NaN equals a NaN).
Random code bytes; fp16 scales random in the ranges real files hold, plus blocks whose scale bytes
are random too (huge, subnormal, infinite and NaN scales).

Usage: check_dequant.py --dump build/tests/gguf_dump_f32
Exit 77 (ctest: skipped) when no `gguf` package is importable, by this python3 or by the one
$INFERLAB_GGUF_PYTHON names (e.g. a venv with `pip install gguf numpy`).
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    np.seterr(all="ignore")  # NaN and inf scales are part of the test
    import gguf
    from gguf import GGMLQuantizationType as Q
except ImportError:
    other = os.environ.get("INFERLAB_GGUF_PYTHON")
    if other and not os.environ.get("INFERLAB_GGUF_REEXEC"):  # once: a venv's python may be a symlink to this one
        os.environ["INFERLAB_GGUF_REEXEC"] = "1"
        try:
            os.execv(other, [other] + sys.argv)
        except OSError as e:
            print("SKIP: INFERLAB_GGUF_PYTHON=%s cannot run: %s" % (other, e))
            sys.exit(77)
    print("SKIP: the `gguf` Python package is not installed (pip install gguf numpy, or set "
          "INFERLAB_GGUF_PYTHON to a python3 that has it)")
    sys.exit(77)

# type: byte offsets of its fp16 scales (random in [lo, hi), or all bytes random for the wild rows)
TYPES = {
    "Q8_0": [(0, 1e-3, 2e-2)],
    "Q4_0": [(0, 1e-3, 2e-2)],
    "Q4_1": [(0, 1e-3, 2e-2), (2, -0.1, 0.0)],
    "Q5_0": [(0, 1e-3, 2e-2)],
    "Q5_1": [(0, 1e-3, 2e-2), (2, -0.1, 0.0)],
    "IQ4_NL": [(0, 1e-3, 2e-2)],
    "Q2_K": [(80, 1e-4, 1e-3), (82, 1e-4, 1e-3)],
    "Q3_K": [(108, 1e-4, 1e-3)],
    "Q4_K": [(0, 1e-4, 1e-3), (2, 1e-4, 1e-3)],
    "Q5_K": [(0, 1e-4, 1e-3), (2, 1e-4, 1e-3)],
    "Q6_K": [(208, 1e-4, 1e-3)],
    "IQ4_XS": [(0, 1e-4, 1e-3)],
}
ROWS = 24  # the first 20 rows with sane scales, the last 4 all random bytes


def random_blocks(rng, qtype, scales, cols, rows=ROWS, wild=4):
    """rows x cols values of random blocks: the last `wild` rows' scale bytes random too."""
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(rows * cols // block, nbytes), dtype=np.uint8)
    sane = (rows - wild) * cols // block
    for at, lo, hi in scales:
        h = rng.uniform(lo, hi, size=sane).astype(np.float16).view(np.uint8).reshape(sane, 2)
        blocks[:sane, at:at + 2] = h
    return blocks.reshape(rows, cols // block * nbytes)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True, help="the gguf_dump_f32 executable")
    args = ap.parse_args()
    rng = np.random.default_rng(20261205)
    cols = 512
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "blocks.gguf")
        writer = gguf.GGUFWriter(path, "llama")
        want = {}
        for name, scales in TYPES.items():
            qtype = Q[name]
            raw = random_blocks(rng, qtype, scales, cols)
            writer.add_tensor(name, raw, raw_dtype=qtype)  # shape [ROWS, cols] from the bytes
            want[name] = gguf.quants.dequantize(raw, qtype).astype(np.float32).reshape(-1)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        run = subprocess.run([args.dump, path, tmp], capture_output=True, text=True)
        if run.returncode != 0:
            print("FAIL: gguf_dump_f32 exited %d: %s" % (run.returncode, run.stderr.strip()))
            return 1
        for name, w in want.items():
            got = np.fromfile(os.path.join(tmp, name + ".f32"), dtype=np.float32)
            if got.shape != w.shape:
                failures.append("%s: %d values, gguf gives %d" % (name, got.size, w.size))
                continue
            same = (got.view(np.uint32) == w.view(np.uint32)) | (np.isnan(got) & np.isnan(w))
            nan = int(np.isnan(w).sum())
            if not same.all():
                i = int(np.argmin(same))
                failures.append("%s: %d of %d values differ, first at %d: inferlab %r, gguf %r" %
                                (name, int((~same).sum()), w.size, i, got[i], w[i]))
            else:
                print("ok   %-6s %6d values bit-exact (%d NaN, %d inf)" % (name, w.size, nan, int(np.isinf(w).sum())))
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
