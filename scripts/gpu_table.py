#!/usr/bin/env python3
"""The side-by-side table of scripts/gpu_check.sh: inferlab vs llama.cpp CUDA vs HF transformers.

Each tool's own output is turned into rows of one JSON-lines file (ROWS), then rendered into one
markdown file. Subcommands (each appends to ROWS, except render):
  inferlab ROWS BENCH.json --stack NAME --shape S --weights W   `inferlab bench -o json` output
  llama-bench ROWS OUT.jsonl --shape S --weights W              `llama-bench -o jsonl` output
  batched-bench ROWS OUT.jsonl --shape S --weights W --model F  `llama-batched-bench
                                                                 --output-format jsonl` output
                                                                 (F: the GGUF, whose size is
                                                                 the weight bytes)
  hf ROWS PEERS.jsonl                                           scripts/gpu_peers.py --jsonl rows
  ceilings ROWS [--roofline FILE] [--peers PEERS.jsonl]         copy GB/s and bf16 GEMM TFLOP/s
                                                                 from cuda_roofline's output
                                                                 (else the peers' torch rows)
  render ROWS --out TABLE.md [--card NAME] [--date ISO]         the markdown table
Every row of the table carries the date, the card and the copy bandwidth measured in the same
run, so that roofline fractions can be computed from the table alone. Weight GB/s = decode steps
per second x the stack's weight bytes (the file or model as the tool reports it, the token
embedding table included, of which a step reads one row: the same overstatement for every stack).
A tool output that cannot be read is an error naming the file and line (exit 1).
"""
import argparse
import json
import os
import re
import sys
import time


class TableError(Exception):
    pass


def read_jsonl(path):
    """The JSON objects of a JSON-lines file; lines that are not objects (logs) are skipped."""
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise TableError(f"{path}:{n}: not a JSON object ({e.msg})")
    except OSError as e:
        raise TableError(f"{path}: cannot read ({e.strerror})")
    return rows


def number(obj, key, where):
    v = obj.get(key)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise TableError(f"{where}: key '{key}' missing or not a number")
    return float(v)


def test_label(kind, n, batch=1, depth=0):
    """pp512, tg128, or tg128 x32 @ d512: inferlab bench's own test names."""
    if kind == "pp":
        return f"pp{n}" if batch == 1 else f"pp{n} x{batch}"
    return f"tg{n}" if batch == 1 and depth == 0 else f"tg{n} x{batch} @ d{depth}"


def row(stack, shape, weights, kind, n, batch, depth, tps, weight_bytes, source):
    return {"stack": stack, "shape": shape, "weights": weights, "kind": kind, "n": int(n), "batch": int(batch),
            "depth": int(depth), "test": test_label(kind, int(n), int(batch), int(depth)), "tps": float(tps),
            "weight_bytes": float(weight_bytes), "source": source}


def from_inferlab(path, stack, shape, weights):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise TableError(f"{path}: not inferlab bench -o json output ({e})")
    if not isinstance(data, list):
        raise TableError(f"{path}: not inferlab bench -o json output (expected a JSON array)")
    out = []
    for i, r in enumerate(data):
        where = f"{path}: row {i + 1}"
        n_prompt, n_gen = number(r, "n_prompt", where), number(r, "n_gen", where)
        batch, depth = number(r, "n_batch", where), number(r, "n_depth", where)
        kind = "pp" if n_prompt > 0 else "tg"
        w = weights or r.get("quantization", "?")
        label = f"{stack} ({r.get('attention', '?')})"
        out.append(row(label, shape, w, kind, n_prompt if kind == "pp" else n_gen, batch, depth,
                       number(r, "avg_ts", where), number(r, "size_bytes", where), "inferlab bench"))
    return out


def from_llama_bench(path, shape, weights):
    out = []
    for i, r in enumerate(read_jsonl(path)):
        where = f"{path}: object {i + 1}"
        n_prompt, n_gen = number(r, "n_prompt", where), number(r, "n_gen", where)
        kind = "pp" if n_prompt > 0 and n_gen == 0 else "tg" if n_gen > 0 and n_prompt == 0 else None
        if kind is None:
            continue  # pp+tg mixes are not in the table
        out.append(row("llama.cpp CUDA", shape, weights, kind, n_prompt if kind == "pp" else n_gen, 1,
                       r.get("n_depth", 0) or 0, number(r, "avg_ts", where), number(r, "model_size", where),
                       "llama-bench"))
    if not out:
        raise TableError(f"{path}: no llama-bench results (expected -o jsonl lines with n_prompt, n_gen, avg_ts)")
    return out


def from_batched_bench(path, shape, weights, model):
    try:
        size = os.path.getsize(model)
    except OSError as e:
        raise TableError(f"{model}: cannot read the GGUF's size ({e.strerror})")
    out = []
    for i, r in enumerate(read_jsonl(path)):
        where = f"{path}: object {i + 1}"
        out.append(row("llama.cpp CUDA", shape, weights, "tg", number(r, "tg", where), number(r, "pl", where),
                       number(r, "pp", where), number(r, "speed_tg", where), size, "llama-batched-bench S_TG"))
    if not out:
        raise TableError(f"{path}: no llama-batched-bench results (expected --output-format jsonl lines)")
    return out


def from_hf(path):
    out = []
    for i, r in enumerate(read_jsonl(path)):
        if r.get("kind") != "hf_generate":
            continue
        where = f"{path}: object {i + 1}"
        batch, prompt, new = number(r, "batch", where), number(r, "prompt", where), number(r, "new", where)
        wb = number(r, "weight_bytes", where)
        stack = "HF generate (sdpa)"
        out.append(row(stack, r.get("shape", "?"), "bf16", "tg", new, batch, prompt, number(r, "decode_tps", where),
                       wb, f"transformers {r.get('transformers', '?')}"))
        if batch == 1:
            out.append(row(stack, r.get("shape", "?"), "bf16", "pp", prompt, 1, 0, number(r, "prefill_tps", where), wb,
                           f"transformers {r.get('transformers', '?')} (generate of 1 token less a decode step)"))
    return out


def ceilings(roofline, peers):
    """{"copy_gbs": .., "gemm_bf16_tflops": .., "ceilings_source": ..}: cuda_roofline first."""
    c = {}
    if roofline and os.path.exists(roofline):
        with open(roofline, encoding="utf-8", errors="replace") as f:
            text = f.read()
        m = re.search(r"peak copy bandwidth measured: ([0-9.]+) GB/s", text)
        if m:
            c["copy_gbs"] = float(m.group(1))
        m = re.search(r"^\| gemm_bf16 \(peak\) \|[^|]*\|[^|]*\|[^|]*\|[^|]*\| ([0-9.]+) \|", text, re.M)
        if m:
            c["gemm_bf16_tflops"] = float(m.group(1))
        if c:
            c["ceilings_source"] = "cuda_roofline"
    if peers and os.path.exists(peers):
        for r in read_jsonl(peers):
            if r.get("kind") == "copy" and "copy_gbs" not in c:
                c["copy_gbs"], c["ceilings_source"] = float(r["gbs"]), "torch copy_"
            if r.get("kind") == "gemm_bf16" and "gemm_bf16_tflops" not in c:
                c["gemm_bf16_tflops"] = float(r["tflops"])
    return c


def load_rows(path):
    rows, meta = [], {}
    if os.path.exists(path):
        for r in read_jsonl(path):
            (meta.update(r["meta"]) if "meta" in r else rows.append(r))
    return rows, meta


def fmt(x, digits=0):
    return f"{x:,.{digits}f}".replace(",", " ")


def render(rows, meta, card, date):
    copy = meta.get("copy_gbs")
    gemm = meta.get("gemm_bf16_tflops")
    head = [f"# inferlab vs llama.cpp CUDA vs HF transformers on {card} ({date})", "",
            (f"Copy bandwidth {fmt(copy)} GB/s (bytes read + written, {meta.get('ceilings_source', '-')})"
             if copy else "Copy bandwidth not measured") + "; bf16 GEMM peak "
            f"{fmt(gemm) + ' TFLOP/s' if gemm else 'not measured'}. Weight GB/s = decode steps/s x the "
            "stack's weight bytes (token embeddings included); 'of copy' = that / the copy bandwidth.", ""]
    table = ["| date | card | copy GB/s | shape | weights | stack | test | t/s | weight GB/s | of copy |",
             "|---|---|---:|---|---|---|---|---:|---:|---:|"]
    order = {"pp": 0, "tg": 1}
    rows = sorted(rows, key=lambda r: (r["shape"], order.get(r["kind"], 2), r["batch"], r["depth"], r["weights"],
                                       r["stack"]))
    for r in rows:
        gbs = frac = "-"
        if r["kind"] == "tg" and r["weight_bytes"] > 0:
            g = r["tps"] / r["batch"] * r["weight_bytes"] / 1e9
            gbs = fmt(g)
            if copy:
                frac = f"{100 * g / copy:.0f} %"
        table.append(f"| {date} | {card} | {fmt(copy) if copy else '-'} | {r['shape']} | {r['weights']} | "
                     f"{r['stack']} | {r['test']} | {fmt(r['tps'], 1)} | {gbs} | {frac} |")
    if not rows:
        table.append(f"| {date} | {card} | {fmt(copy) if copy else '-'} | - | - | no rows measured | - | - | - | - |")
    # inferlab's best over each peer on the same test (kind, batch, depth) and weights.
    ratios = ["", "| shape | test | weights | best inferlab stack | t/s | peer | peer t/s | ratio |",
              "|---|---|---|---|---:|---|---:|---:|"]
    keys = sorted({(r["shape"], r["kind"], r["batch"], r["depth"], r["weights"]) for r in rows})
    for shape, kind, batch, depth, weights in keys:
        same = [r for r in rows if (r["shape"], r["kind"], r["batch"], r["depth"], r["weights"]) ==
                (shape, kind, batch, depth, weights)]
        ours = [r for r in same if r["stack"].startswith("inferlab")]
        if not ours:
            continue
        best = max(ours, key=lambda r: r["tps"])
        for peer in (r for r in same if not r["stack"].startswith("inferlab")):
            ratios.append(f"| {shape} | {best['test']} | {weights} | {best['stack']} | {fmt(best['tps'], 1)} | "
                          f"{peer['stack']} | {fmt(peer['tps'], 1)} | {best['tps'] / peer['tps']:.2f}x |")
    if len(ratios) == 3:
        ratios.append("| - | - | - | no test with both inferlab and a peer | - | - | - | - |")
    return "\n".join(head + table + ratios) + "\n"


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("inferlab", "llama-bench", "batched-bench", "hf"):
        s = sub.add_parser(name)
        s.add_argument("rows")
        s.add_argument("input")
        if name != "hf":
            s.add_argument("--shape", required=True)
            s.add_argument("--weights", default="" if name == "inferlab" else None, required=name != "inferlab")
        if name == "inferlab":
            s.add_argument("--stack", required=True)
        if name == "batched-bench":
            s.add_argument("--model", required=True)
    s = sub.add_parser("ceilings")
    s.add_argument("rows")
    s.add_argument("--roofline")
    s.add_argument("--peers")
    s = sub.add_parser("render")
    s.add_argument("rows")
    s.add_argument("--out", required=True)
    s.add_argument("--card", default="unknown card")
    s.add_argument("--date", default=time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()))
    a = p.parse_args(argv)
    try:
        if a.cmd == "render":
            rows, meta = load_rows(a.rows)
            text = render(rows, meta, a.card, a.date)
            with open(a.out, "w", encoding="utf-8") as f:
                f.write(text)
            print(text, end="")
            return 0
        if a.cmd == "inferlab":
            new = from_inferlab(a.input, a.stack, a.shape, a.weights)
        elif a.cmd == "llama-bench":
            new = from_llama_bench(a.input, a.shape, a.weights)
        elif a.cmd == "batched-bench":
            new = from_batched_bench(a.input, a.shape, a.weights, a.model)
        elif a.cmd == "hf":
            new = from_hf(a.input)
        else:
            new = [{"meta": ceilings(a.roofline, a.peers)}]
        with open(a.rows, "a", encoding="utf-8") as f:
            for r in new:
                f.write(json.dumps(r) + "\n")
        return 0
    except TableError as e:
        print(f"gpu_table: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
