#!/usr/bin/env python3
"""The GPU peers beside inferlab's own CUDA numbers (scripts/gpu_check.sh runs this).

Measures, on the first CUDA device, with CUDA events (median of timed repeats after warm-up):
  * the two ceilings: a device-to-device copy (bytes read + written) and an 8192^3 bf16 GEMM;
  * PyTorch SDPA at the decode-attention shape cuda_kernel_roofline times (8 sequences x 1 query
    at context 4096, 32 query / 8 KV heads, head_dim 128; fp32 and bf16), GB/s of K and V read;
  * Hugging Face transformers `generate` (SDPA attention, greedy, bf16) on seeded random weights
    of a real shape (default tinyllama-1.1b, the shape of `inferlab bench --preset
    tinyllama-1.1b`): decode tok/s at each batch size, from two generate calls that differ only
    in new tokens (so prefill cancels).
Prints one markdown table. Each section is independent: a failing one prints its error and the
others still run; the exit status is the number of failed sections.

  python3 scripts/gpu_peers.py [--shape tinyllama-1.1b|llama-3-8b|...] [--batches 1,32]
      [--prompt 128] [--new 64] [--model-dir DIR] [--sections ceilings,sdpa,generate]
      [--jsonl FILE]
--model-dir: a folder `inferlab export --format hf` wrote (config.json + model.safetensors):
generate then runs the very weights inferlab runs (loaded in bf16) instead of random ones of
the --shape.
--jsonl: also append one JSON object per measured row to FILE (the side-by-side table of
scripts/gpu_check.sh reads them through scripts/gpu_table.py): {"kind": "copy"|"gemm_bf16"|
"hf_generate", ...}.
"""
import argparse
import sys
import time
import traceback

SHAPES = {  # dim, hidden, layers, heads, kv_heads, vocab (core/src/model/model_config.cpp presets)
    "stories15m": (288, 768, 6, 6, 6, 32000),
    "tinyllama-1.1b": (2048, 5632, 22, 32, 4, 32000),
    "llama-3.2-1b": (2048, 8192, 16, 32, 8, 128256),
    "llama-3-8b": (4096, 14336, 32, 32, 8, 128256),
}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="tinyllama-1.1b", choices=sorted(SHAPES))
    p.add_argument("--batches", default="1,32", help="comma-separated batch sizes for generate")
    p.add_argument("--prompt", type=int, default=128, help="prompt tokens per sequence")
    p.add_argument("--new", type=int, default=64, help="decode tokens per sequence (> 1)")
    p.add_argument("--repeats", type=int, default=20, help="timed repeats for the kernel rows")
    p.add_argument("--model-dir", default=None, help="an `inferlab export --format hf` folder to load")
    p.add_argument("--layers", type=int, default=0, help="keep only the first N layers of --shape (0 = all)")
    p.add_argument("--label", default=None, help="the shape's name in --jsonl rows (default --shape)")
    p.add_argument("--sections", default="ceilings,sdpa,generate",
                   help="comma-separated subset of ceilings, sdpa, generate")
    p.add_argument("--jsonl", default=None, help="append machine-readable rows to this file")
    a = p.parse_args(argv)
    a.sections = [x for x in a.sections.split(",") if x]
    bad = [x for x in a.sections if x not in SECTIONS]
    if bad or not a.sections:
        p.error(f"--sections = {','.join(a.sections)!r}: allowed: a comma-separated subset of {', '.join(SECTIONS)}")
    if a.model_dir is not None:
        import os
        if not os.path.isfile(os.path.join(a.model_dir, "config.json")):
            p.error(f"--model-dir {a.model_dir}: no config.json there (allowed: a folder `inferlab export "
                    "--format hf` wrote)")
    try:
        a.batches = [int(b) for b in a.batches.split(",") if b]
    except ValueError:
        p.error(f"--batches = {a.batches!r}: allowed: comma-separated positive integers")
    if not a.batches or min(a.batches) < 1:
        p.error("--batches: allowed: comma-separated positive integers")
    if a.layers < 0:
        p.error(f"--layers = {a.layers}: allowed: 0 (all) or a positive count")
    if a.new < 2 or a.prompt < 1:
        p.error("--new must be >= 2 and --prompt >= 1")
    return a


def record(a, **row):
    """One machine-readable row for the side-by-side table (--jsonl)."""
    if a.jsonl is not None:
        import json
        with open(a.jsonl, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def timed(torch, fn, repeats, warmup=3):
    """Median and min of `repeats` event-timed calls of fn, in seconds."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    times.sort()
    return times[len(times) // 2], times[0]


def ceilings(torch, a, rows):
    n = 1 << 29  # 2 GiB of fp32 per buffer, far past the 60 MB L2
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    med, best = timed(torch, lambda: dst.copy_(src), a.repeats)
    rows.append(("copy d2d (read+write)", "2 GiB fp32", med, best, f"{2 * 4 * n / med / 1e9:.0f} GB/s"))
    record(a, kind="copy", gbs=2 * 4 * n / med / 1e9)
    del src, dst
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    med, best = timed(torch, lambda: x @ y, max(5, a.repeats // 2))
    rows.append(("GEMM bf16 (torch.matmul)", "8192^3 random", med, best, f"{2 * m**3 / med / 1e12:.0f} TFLOP/s"))
    record(a, kind="gemm_bf16", tflops=2 * m**3 / med / 1e12)


def sdpa(torch, a, rows):
    import torch.nn.functional as F
    seqs, heads, kv_heads, ctx, d = 8, 32, 8, 4096, 128
    for dtype, size in ((torch.float32, 4), (torch.bfloat16, 2)):
        q = torch.randn(seqs, heads, 1, d, device="cuda", dtype=dtype)
        k = torch.randn(seqs, kv_heads, ctx, d, device="cuda", dtype=dtype)
        v = torch.randn(seqs, kv_heads, ctx, d, device="cuda", dtype=dtype)
        med, best = timed(torch, lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), a.repeats)
        kv_bytes = 2 * seqs * kv_heads * ctx * d * size
        rows.append((f"SDPA decode {str(dtype).split('.')[-1]}", "8 seqs x ctx 4096, 32/8 heads, d 128",
                     med, best, f"{kv_bytes / med / 1e9:.0f} GB/s"))


def hf_generate(torch, a, rows):
    import transformers
    if a.model_dir is not None:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            a.model_dir, dtype=torch.bfloat16, attn_implementation="sdpa").to("cuda").eval()
        vocab, label = model.config.vocab_size, f"{a.model_dir} (inferlab's weights)"
    else:
        dim, hidden, layers, heads, kv_heads, vocab = SHAPES[a.shape]
        layers = min(layers, a.layers) if a.layers > 0 else layers
        cfg = transformers.LlamaConfig(hidden_size=dim, intermediate_size=hidden, num_hidden_layers=layers,
                                       num_attention_heads=heads, num_key_value_heads=kv_heads, vocab_size=vocab,
                                       max_position_embeddings=4096, tie_word_embeddings=False)
        cfg._attn_implementation = "sdpa"
        torch.manual_seed(0)
        # Built in bf16 directly: an 8B-class model in fp32 first would take 32 GB and the time
        # to initialise it twice.
        default_dtype = torch.get_default_dtype()
        torch.set_default_dtype(torch.bfloat16)
        try:
            with torch.device("cuda"):
                model = transformers.LlamaForCausalLM(cfg).eval()
        finally:
            torch.set_default_dtype(default_dtype)
        label = f"{a.shape} random" + (f", {layers} layers" if a.layers > 0 else "")
    params = sum(p.numel() for p in model.parameters())
    for batch in a.batches:
        ids = torch.randint(3, vocab, (batch, a.prompt), device="cuda")
        mask = torch.ones_like(ids)

        def gen(new):
            with torch.inference_mode():
                out = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=new,
                                     min_new_tokens=new, pad_token_id=0)
            assert out.shape[1] == a.prompt + new, out.shape
            return out

        gen(2)  # warm-up (kernels, caches)
        t = {}
        for new in (1, a.new):
            best = float("inf")
            for _ in range(3):
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                gen(new)
                torch.cuda.synchronize()
                best = min(best, time.perf_counter() - t0)
            t[new] = best
        decode_s = (t[a.new] - t[1]) / (a.new - 1)
        prefill_s = max(t[1] - decode_s, 1e-9)  # generate(1) = prefill + the first token's step
        shape = a.label or (a.shape if a.model_dir is None else a.model_dir)
        record(a, kind="hf_generate", shape=shape, batch=batch,
               prompt=a.prompt, new=a.new, params=params, weight_bytes=2 * params, decode_tps=batch / decode_s,
               prefill_tps=batch * a.prompt / prefill_s, transformers=transformers.__version__,
               torch=torch.__version__)
        rows.append((f"HF generate bf16 sdpa, batch {batch}", f"{label} ({params / 1e9:.2f} B), "
                     f"prompt {a.prompt}", decode_s, t[1], f"{batch / decode_s:.0f} tok/s decode "
                     f"({2 * params / decode_s / 1e9:.0f} GB/s of bf16 weights)"))
    rows.append(("  (HF: time = one decode step; min = prefill + first token)", "", 0, 0,
                 f"transformers {transformers.__version__}, torch {torch.__version__}"))


SECTIONS = {"ceilings": ceilings, "sdpa": sdpa, "generate": hf_generate}


def main(argv):
    a = parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("gpu_peers: skipped, torch sees no CUDA device")
        return 0
    rows, failed = [], 0
    for name in a.sections:
        section = SECTIONS[name]
        try:
            section(torch, a, rows)
        except Exception:  # one section's failure must not hide the others' numbers
            failed += 1
            print(f"gpu_peers: {section.__name__} failed:", file=sys.stderr)
            traceback.print_exc()
    print(f"## peers on {torch.cuda.get_device_name(0)} ({time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})")
    print("| peer op | shape | median ms | min ms | rate |\n|---|---|---|---|---|")
    for op, shape, med, best, rate in rows:
        print(f"| {op} | {shape} | {med * 1e3:.3f} | {best * 1e3:.3f} | {rate} |")
    return failed


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
