#!/usr/bin/env python3
"""Figures for one inferlab results folder: `inferlab plot RUN_DIR` runs this with the folder.

Writes into RUN_DIR/figures/:
  latency_cdf.png     TTFT, TPOT and end-to-end latency CDFs per variant (requests.csv, all repeats)
  headline.png        headline metrics, mean per variant with 95% CI whiskers (metrics.csv)
  sweep_<axis>.png    for sweeps (variants named "axis=value,..."): headline metrics along each
                      numeric axis, one line per setting of the other axes
KV blocks over time are not recorded per step in a results folder, so that figure is skipped.
Appends (or replaces) a "## Figures" section in summary.md linking them. Needs matplotlib
(Debian: python3-matplotlib); uses only the standard library otherwise.
"""
import csv
import math
import os
import re
import sys
from collections import OrderedDict, defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HEADLINE = ["ttft_ms_p50", "tpot_ms_p50", "itl_ms_p99", "e2e_ms_p90", "throughput_out_tok_s", "goodput_req_s",
            "batch_mean", "kv_blocks_peak", "preemptions", "prefix_hit_frac", "spec_accept_frac", "weights_bytes",
            "perplexity", "kl_vs_baseline", "top1_agree_frac"]
# Two-sided 95% Student t quantiles by degrees of freedom (the summary's mean_ci95 uses the same).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
       15: 2.131, 20: 2.086, 30: 2.042}


def t95(df):
    for k in sorted(T95):
        if df <= k:
            return T95[k]
    return 1.96


def mean_ci(xs):
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))
    return m, t95(len(xs) - 1) * sd / math.sqrt(len(xs))


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


def latency_cdfs(requests, variants, out):
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    for ax, (label, fn) in zip(axes, [
            ("TTFT (ms)", lambda r: num(r["ttft_ms"])),
            ("TPOT (ms/token)", lambda r: tpot(r)),
            ("end-to-end latency (ms)", lambda r: num(r["e2e_ms"]))]):
        for v in variants:
            xs = sorted(x for x in (fn(r) for r in requests if r["variant"] == v) if x is not None)
            if xs:
                ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post", label=v)
        ax.set_xlabel(label)
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("Latency CDFs (all repeats)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def tpot(r):
    """Time per output token after the first: (e2e - ttft) / (output_tokens - 1)."""
    e2e, ttft, n = num(r["e2e_ms"]), num(r["ttft_ms"]), num(r["output_tokens"])
    if e2e is None or ttft is None or n is None or n < 2:
        return None
    return (e2e - ttft) / (n - 1)


def values_by(metrics, variants):
    """variant -> metric -> values over ok repeats."""
    vals = defaultdict(lambda: defaultdict(list))
    for r in metrics:
        if r["status"] != "ok":
            continue
        for k, s in r.items():
            x = num(s)
            if x is not None and k not in ("repeat", "wall_s"):
                vals[r["variant"]][k].append(x)
    return vals


def shown_metrics(vals, variants):
    return [m for m in HEADLINE if any(x != 0 for v in variants for x in vals[v].get(m, []))]


def headline_bars(vals, variants, out):
    shown = shown_metrics(vals, variants)
    if not shown:
        return False
    cols = min(4, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for i, m in enumerate(shown):
        ax = axes[i // cols][i % cols]
        means, halves = zip(*[mean_ci(vals[v][m]) if vals[v].get(m) else (0.0, 0.0) for v in variants])
        ax.bar(range(len(variants)), means, yerr=halves, capsize=4, color="tab:blue", alpha=0.8)
        ax.set_xticks(range(len(variants)))
        ax.set_xticklabels(variants, rotation=30, ha="right", fontsize=7)
        ax.set_title(m, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    for j in range(len(shown), rows * cols):
        axes[j // cols][j % cols].axis("off")
    fig.suptitle("Headline metrics: mean with 95% CI over repeats")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def sweep_plots(vals, variants, figdir):
    """Variants named "a=1,b=2" (the [sweep] grid): one figure per numeric axis."""
    points = OrderedDict()
    for v in variants:
        parts = v.split(",")
        if all(re.fullmatch(r"[\w.]+=[^=]+", p) for p in parts):
            points[v] = OrderedDict(p.split("=", 1) for p in parts)
    if len(points) < 2:
        return []
    axes_names = list(next(iter(points.values())).keys())
    written = []
    for axis in axes_names:
        if not all(axis in p and num(p[axis]) is not None for p in points.values()):
            continue
        if len({p[axis] for p in points.values()}) < 2:
            continue
        shown = shown_metrics(vals, list(points))[:4]
        if not shown:
            continue
        fig, axs = plt.subplots(1, len(shown), figsize=(4.5 * len(shown), 3.8), squeeze=False)
        for ax, m in zip(axs[0], shown):
            lines = defaultdict(list)
            for v, p in points.items():
                rest = ",".join(f"{k}={x}" for k, x in p.items() if k != axis) or "sweep"
                if vals[v].get(m):
                    mean, half = mean_ci(vals[v][m])
                    lines[rest].append((num(p[axis]), mean, half))
            for rest, pts in lines.items():
                pts.sort()
                ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o",
                            capsize=3, label=rest)
            ax.set_xlabel(axis)
            ax.set_title(m, fontsize=9)
            ax.grid(alpha=0.3)
        axs[0][0].legend(fontsize=7)
        fig.tight_layout()
        name = "sweep_" + re.sub(r"[^\w.]", "_", axis) + ".png"
        fig.savefig(os.path.join(figdir, name), dpi=100)
        plt.close(fig)
        written.append(name)
    return written


def link_figures(run, names):
    path = os.path.join(run, "summary.md")
    text = open(path).read() if os.path.exists(path) else ""
    text = re.sub(r"\n## Figures\n.*?(?=\n## |\Z)", "", text, flags=re.S).rstrip("\n") + "\n"
    text += "\n## Figures\n\n" + "".join(f"![{n[:-4]}](figures/{n})\n" for n in names)
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot_run.py RUN_DIR")
    run = sys.argv[1]
    metrics = read_csv(os.path.join(run, "metrics.csv"))
    variants = list(OrderedDict.fromkeys(r["variant"] for r in metrics))
    figdir = os.path.join(run, "figures")
    os.makedirs(figdir, exist_ok=True)
    written = []
    req_path = os.path.join(run, "requests.csv")
    if os.path.exists(req_path):
        latency_cdfs(read_csv(req_path), variants, os.path.join(figdir, "latency_cdf.png"))
        written.append("latency_cdf.png")
    vals = values_by(metrics, variants)
    if headline_bars(vals, variants, os.path.join(figdir, "headline.png")):
        written.append("headline.png")
    written += sweep_plots(vals, variants, figdir)
    link_figures(run, written)
    for n in written:
        print(os.path.join(figdir, n))


if __name__ == "__main__":
    main()
