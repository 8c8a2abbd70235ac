#!/usr/bin/env python3
"""scripts/gpu_check.sh and scripts/gpu_table.py without a GPU (ctest gpu_check.plan_and_table).

1. The budget plan (`gpu_check.sh --plan`, the same trimming code the real run uses, with each
   step taking its estimate): correctness steps come first, then the table, then the sanitizers;
   what runs is a prefix of that order; a smaller budget runs a subset of what a larger one runs;
   the estimates of what runs fit the budget less the reserve, and no step's time limit reaches
   past the budget; the default budget runs every correctness step; a bad budget is a one-line
   error.
2. A run with a pack that has nothing in it: every step fails or says "not built", the run ends,
   and the table file is still written (with its "no rows" line).
3. The table writer on recorded outputs of each tool (inferlab bench -o json, llama-bench -o
   jsonl, llama-batched-bench --output-format jsonl, gpu_peers.py --jsonl, cuda_roofline): every
   row carries date, card and copy bandwidth, the weight GB/s and fraction of copy are computed
   from t/s, batch and weight bytes, inferlab's best is compared with each peer on the same test
   and weights, and unreadable input is a one-line error naming the file.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

PHASES = ["correctness", "table", "sanitizer"]
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def plan(root, budget, reserve=None):
    env = dict(os.environ, GPU_CHECK_BUDGET_S=str(budget))
    env.pop("GPU_CHECK_ONLY", None)
    if reserve is not None:
        env["GPU_CHECK_RESERVE_S"] = str(reserve)
    p = subprocess.run(["bash", os.path.join(root, "scripts/gpu_check.sh"), "--plan"], env=env,
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"--plan at {budget} s exited {p.returncode}: {p.stderr.strip()}")
    steps = []
    for line in p.stdout.splitlines():
        m = re.match(r"plan (run|trim) +(\w+) +est +(\d+) s(?:  limit +(\d+) s)?  (.+)$", line)
        if m:
            steps.append({"action": m[1], "phase": m[2], "est": int(m[3]),
                          "limit": int(m[4]) if m[4] else None, "name": m[5]})
    m = re.search(r"budget (\d+) s, reserve (\d+) s", p.stdout)
    return steps, int(m[2])


def test_plan(root):
    budgets = [30, 60, 90, 150, 240, 360, 540, 800, 3600]
    plans = {b: plan(root, b) for b in budgets}
    names = [s["name"] for s in plans[540][0]]
    check(len(names) >= 20, f"the plan lists {len(names)} steps; expected the whole step table")
    for b, (steps, reserve) in plans.items():
        check([s["name"] for s in steps] == names, f"budget {b}: the steps or their order differ from budget 540's")
        order = [PHASES.index(s["phase"]) for s in steps]
        check(order == sorted(order), f"budget {b}: phases out of order: {[s['phase'] for s in steps]}")
        actions = [s["action"] for s in steps]
        first_trim = actions.index("trim") if "trim" in actions else len(actions)
        check(all(a == "trim" for a in actions[first_trim:]),
              f"budget {b}: a step runs after a trimmed one (trimming is not from the end): {actions}")
        run = [s for s in steps if s["action"] == "run"]
        used = 0
        for s in run:
            check(s["limit"] is not None and s["limit"] <= b - reserve - used,
                  f"budget {b}: {s['name']} may run {s['limit']} s with {b - reserve - used} s left")
            used += s["est"]
        check(used <= b - reserve, f"budget {b}: the steps that run take {used} s of {b - reserve}")
        if first_trim < len(steps):
            check(steps[first_trim]["est"] > b - reserve - used,
                  f"budget {b}: {steps[first_trim]['name']} was trimmed though it fits")
    for small, large in zip(budgets, budgets[1:]):
        a = {s["name"] for s in plans[small][0] if s["action"] == "run"}
        z = {s["name"] for s in plans[large][0] if s["action"] == "run"}
        check(a <= z, f"budget {small} runs {sorted(a - z)}, which budget {large} trims")
    default = plans[540][0]
    check(all(s["action"] == "run" for s in default if s["phase"] == "correctness"),
          "the default budget (540 s) does not run every correctness step")
    check(any(s["action"] == "run" and s["phase"] == "table" for s in default),
          "the default budget (540 s) runs no table step")
    check(all(s["action"] == "run" for s in plans[3600][0]), "3600 s does not run every step")
    check(any(s["phase"] == "sanitizer" for s in default) and default[-1]["phase"] == "sanitizer",
          "the sanitizers are not the last steps")
    for bad in ("abc", "10", "99999", "-5"):
        env = dict(os.environ, GPU_CHECK_BUDGET_S=bad)
        p = subprocess.run(["bash", os.path.join(root, "scripts/gpu_check.sh"), "--plan"], env=env,
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "GPU_CHECK_BUDGET_S" in p.stderr,
              f"GPU_CHECK_BUDGET_S={bad}: exit {p.returncode}, stderr {p.stderr!r}; expected one line and exit 2")


def test_empty_pack(root, tmp):
    pack = os.path.join(tmp, "pack")
    os.makedirs(os.path.join(pack, "bin"))
    with open(os.path.join(pack, "run"), "w") as f:
        f.write("#!/bin/sh\necho \"fake pack: $1\" >&2\nexit 3\n")
    os.chmod(os.path.join(pack, "run"), 0o755)
    out = os.path.join(tmp, "out")
    os.makedirs(out)
    fakebin = os.path.join(tmp, "fakebin")
    os.makedirs(fakebin)
    for tool in ("nvidia-smi", "python3"):  # no GPU here, and no torch: both fail fast
        with open(os.path.join(fakebin, tool), "w") as f:
            if tool == "python3":
                f.write(f"#!/bin/sh\ncase \"$1\" in *gpu_peers.py) echo 'no torch' >&2; exit 1;; esac\n"
                        f"exec {sys.executable} \"$@\"\n")
            else:
                f.write("#!/bin/sh\necho 'no GPU' >&2\nexit 9\n")
        os.chmod(os.path.join(fakebin, tool), 0o755)
    env = dict(os.environ, OUT=out, GPU_CHECK_WORK=os.path.join(tmp, "work"), GPU_CHECK_BUDGET_S="120",
               GPU_CHECK_PEER=os.path.join(tmp, "none.tar.xz"), PATH=fakebin + os.pathsep + os.environ["PATH"])
    env.pop("GPU_CHECK_ONLY", None)
    p = subprocess.run(["bash", os.path.join(root, "scripts/gpu_check.sh"), pack], env=env, capture_output=True,
                       text=True, timeout=120)
    text = p.stdout + p.stderr
    check(p.returncode > 0, f"an empty pack: exit {p.returncode}; expected the number of failed steps")
    check("| test_cuda | correctness | not built (no test_cuda in" in text, "an empty pack: test_cuda not 'not built'")
    check("| llama.cpp CUDA tinyllama-1.1b | table | not built (no llama.cpp peer" in text,
          "an empty pack: the llama.cpp step is not 'not built'")
    check("| nvidia-smi | correctness | FAILED" in text, "an empty pack: nvidia-smi did not fail")
    table = os.path.join(out, "gpu_table.md")
    check(os.path.isfile(table) and "no rows measured" in open(table).read(),
          "an empty pack: gpu_table.md missing or without its 'no rows measured' line")
    check(os.path.isfile(os.path.join(out, "gpu_check.log")), "an empty pack: no gpu_check.log")
    # The same pack compressed (pack_gpu_build.sh --xz): unpacked into the work folder and used.
    xz = os.path.join(tmp, "packxz")
    os.makedirs(xz)
    subprocess.run(["tar", "-C", pack, "-cJf", os.path.join(xz, "pack.tar.xz"), "."], check=True)
    env["GPU_CHECK_ONLY"] = "^test_cuda$"
    p = subprocess.run(["bash", os.path.join(root, "scripts/gpu_check.sh"), xz], env=env, capture_output=True,
                       text=True, timeout=60)
    unpacked = os.path.join(tmp, "work", "pack", "bin")
    check(f"| test_cuda | correctness | not built (no test_cuda in {unpacked}" in p.stdout,
          f"a compressed pack was not unpacked into the work folder:\n{p.stdout}{p.stderr}")


ROOFLINE = """device: NVIDIA H100 80GB HBM3, 132 SMs, sm_90

| op | shape | time (us) | GB/s | % of copy BW | TFLOP/s | % of GEMM peak |
|---|---|---|---|---|---|---|
| copy_f32 (peak) | 1 GiB | 716.00 | 3000 | 100% | - | - |
| gemm_bf16 (peak) | 8192^3 | 1500.00 | 0 | 0% | 733.0 | 100% |

peak copy bandwidth measured: 3000 GB/s (H200 HBM3e nominal ~4800 GB/s)
"""


def test_table(root, tmp):
    tool = [sys.executable, os.path.join(root, "scripts/gpu_table.py")]
    rows = os.path.join(tmp, "rows.jsonl")

    def t(*args, ok=True):
        p = subprocess.run(tool + list(args), capture_output=True, text=True, timeout=60)
        if ok and p.returncode != 0:
            raise AssertionError(f"gpu_table {' '.join(args)}: exit {p.returncode}: {p.stderr.strip()}")
        return p

    def write(name, text):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    roof = write("roofline.txt", ROOFLINE)
    t("ceilings", rows, "--roofline", roof)
    gb = 2_200_000_000
    bench = [{"model": "tinyllama-1.1b", "size_bytes": gb, "attention": "flash", "quantization": "bf16",
              "test": "pp512", "n_prompt": 512, "n_gen": 0, "n_batch": 1, "n_depth": 0, "avg_ts": 20000.0},
             {"model": "tinyllama-1.1b", "size_bytes": gb, "attention": "flash", "quantization": "bf16",
              "test": "tg128 x1 @ d512", "n_prompt": 0, "n_gen": 128, "n_batch": 1, "n_depth": 512, "avg_ts": 1000.0},
             {"model": "tinyllama-1.1b", "size_bytes": gb, "attention": "flash", "quantization": "bf16",
              "test": "tg128 x32 @ d512", "n_prompt": 0, "n_gen": 128, "n_batch": 32, "n_depth": 512,
              "avg_ts": 16000.0}]
    t("inferlab", rows, write("bench.json", json.dumps(bench)), "--stack", "inferlab eager", "--shape", "tinyllama-1.1b")
    q4 = write("tl-q4_0.gguf", "x" * 1000)
    lb = [{"model_size": 630_000_000, "n_prompt": 512, "n_gen": 0, "avg_ts": 9000.5},
          {"model_size": 630_000_000, "n_prompt": 0, "n_gen": 128, "avg_ts": 400.0}]
    t("llama-bench", rows, write("lb.jsonl", "ggml_cuda_init: found 1 device\n" + "\n".join(map(json.dumps, lb))),
      "--shape", "tinyllama-1.1b", "--weights", "Q4_0")
    bb = [{"pp": 512, "tg": 128, "pl": 32, "speed_tg": 6400.0}]
    t("batched-bench", rows, write("bb.jsonl", "main: n_kv_max = 20544\n" + json.dumps(bb[0]) + "\n"),
      "--shape", "tinyllama-1.1b", "--weights", "Q4_0", "--model", q4)
    hf = [{"kind": "copy", "gbs": 2900.0},
          {"kind": "hf_generate", "shape": "tinyllama-1.1b", "batch": 1, "prompt": 512, "new": 128,
           "weight_bytes": gb, "decode_tps": 50.0, "prefill_tps": 8000.0, "transformers": "5.17.0"},
          {"kind": "hf_generate", "shape": "tinyllama-1.1b", "batch": 32, "prompt": 512, "new": 128,
           "weight_bytes": gb, "decode_tps": 1600.0, "prefill_tps": 9000.0, "transformers": "5.17.0"}]
    t("hf", rows, write("hf.jsonl", "\n".join(map(json.dumps, hf))))
    out = os.path.join(tmp, "table.md")
    text = t("render", rows, "--out", out, "--card", "NVIDIA H100 80GB HBM3", "--date", "2026-12-06T05:00Z").stdout
    check(open(out).read() == text, "render: the file differs from what it printed")
    lines = [ln for ln in text.splitlines() if ln.startswith("| 2026-12-06T05:00Z | NVIDIA H100 80GB HBM3 | 3 000 |")]
    check(len(lines) == 9, f"render: {len(lines)} measured rows carry date, card and copy GB/s; expected 9:\n{text}")
    # inferlab bf16 batch 1 at 1000 t/s x 2.2 GB = 2200 GB/s = 73 % of 3000.
    check(any("inferlab eager (flash) | tg128 x1 @ d512 | 1 000.0 | 2 200 | 73 % |" in ln for ln in lines),
          f"render: the batch-1 roofline fraction is wrong:\n{text}")
    # batch 32 at 16000 t/s = 500 steps/s x 2.2 GB = 1100 GB/s = 37 %.
    check(any("tg128 x32 @ d512 | 16 000.0 | 1 100 | 37 % |" in ln for ln in lines),
          f"render: the batch-32 weight GB/s is wrong:\n{text}")
    # llama-batched-bench's weight bytes are the GGUF's size (1000 bytes here).
    check(any("llama.cpp CUDA | tg128 x32 @ d512 | 6 400.0 | 0 | 0 % |" in ln for ln in lines),
          f"render: the batched-bench row is wrong:\n{text}")
    check("| tinyllama-1.1b | tg128 x1 @ d512 | bf16 | inferlab eager (flash) | 1 000.0 | HF generate (sdpa) | 50.0 | "
          "20.00x |" in text, f"render: the ratio to HF at batch 1 is missing or wrong:\n{text}")
    check("| tinyllama-1.1b | pp512 | bf16 | inferlab eager (flash) | 20 000.0 | HF generate (sdpa) | 8 000.0 | 2.50x |"
          in text, f"render: the pp512 ratio to HF is missing or wrong:\n{text}")
    check("bf16 GEMM peak 733 TFLOP/s" in text and "cuda_roofline" in text,
          f"render: the ceilings' line lacks the GEMM peak or its source:\n{text}")
    # Unreadable input: one line naming the file (and line), exit 1.
    p = t("llama-bench", rows, write("broken.jsonl", "{not json\n"), "--shape", "x", "--weights", "Q4_0", ok=False)
    check(p.returncode == 1 and "broken.jsonl:1:" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          f"a broken jsonl: exit {p.returncode}, stderr {p.stderr!r}")
    p = t("inferlab", rows, write("nokey.json", json.dumps([{"n_prompt": 1}])), "--stack", "s", "--shape", "x", ok=False)
    check(p.returncode == 1 and "nokey.json: row 1: key 'n_gen' missing" in p.stderr,
          f"a bench row without n_gen: exit {p.returncode}, stderr {p.stderr!r}")


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--root", required=True)
    root = os.path.abspath(a.parse_args().root)
    test_plan(root)
    with tempfile.TemporaryDirectory() as tmp:
        test_table(root, tmp)
    with tempfile.TemporaryDirectory() as tmp:
        test_empty_pack(root, tmp)
    for f in failures:
        print("FAIL:", f)
    print(f"gpu_check tests: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
