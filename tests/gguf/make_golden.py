#!/usr/bin/env python3
"""Writes tests/data/gguf_golden: random blocks of every quantised GGML type inferlab loads and the
`gguf` Python package's dequantisation of them, which tests/core/test_gguf_golden.cpp requires
inferlab's dequantiser to reproduce bit for bit (so that check runs without the package).

Per type T (check_dequant.TYPES): T.blocks, the raw blocks of 4 rows of 512 values (the first 3
rows with fp16 scales in the ranges real files hold, the last with every byte random: huge,
subnormal, infinite and NaN scales), and T.f32, gguf.quants.dequantize of them as little-endian
float32. Deterministic (fixed seed); rerun only to add a type or after a gguf package change.

Usage: python3 tests/gguf/make_golden.py [OUTDIR]   (needs `pip install gguf numpy`)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_dequant as cd  # noqa: E402  (exits 77 with a message when gguf is not importable)

ROWS, WILD, COLS = 4, 1, 512


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "gguf_golden")
    os.makedirs(out, exist_ok=True)
    rng = cd.np.random.default_rng(20261206)
    for name, scales in cd.TYPES.items():
        qtype = cd.Q[name]
        raw = cd.random_blocks(rng, qtype, scales, COLS, ROWS, WILD)
        values = cd.gguf.quants.dequantize(raw, qtype).astype("<f4").reshape(-1)
        assert values.size == ROWS * COLS, name
        raw.reshape(-1).tofile(os.path.join(out, name + ".blocks"))
        values.tofile(os.path.join(out, name + ".f32"))
        print("wrote %-6s %5d bytes of blocks, %d values (%d NaN, %d inf)" %
              (name, raw.size, values.size, int(cd.np.isnan(values).sum()), int(cd.np.isinf(values).sum())))
    version = getattr(cd.gguf, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version
        version = dist_version("gguf")
    print("gguf package %s, numpy %s" % (version, cd.np.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
