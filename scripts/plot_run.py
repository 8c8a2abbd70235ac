#!/usr/bin/env python3
"""Figures for one inferlab results folder: `inferlab plot RUN_DIR` runs this with the folder.

Writes into RUN_DIR/figures/:
  latency_cdf.png     TTFT, TPOT and end-to-end latency CDFs per variant (requests.csv, all repeats)
  headline.png        headline metrics, mean per variant with 95% CI whiskers (metrics.csv)
  kv_blocks.png       KV blocks used, reserved and cached over time per variant (steps.csv, repeat 0)
  request_timeline.png  per-request timeline for a sample of requests per variant (requests.csv,
                      repeat 0): queued (arrival to first scheduled), prefill (first scheduled to
                      first token: every prompt chunk), decode (to finish), preemptions marked
  sweep_<axis>.png    for sweeps (variants named "axis=value,..."): headline metrics along each
                      numeric axis, mean with a 95% CI band, one line per setting of the others
  quality.png         when metrics.csv has perplexity: perplexity and kl_vs_baseline against
                      weights_bytes per variant (the quantization trade-off)
  predicted.png       when metrics.csv has pred_* columns: measured and predicted (the calibrated
                      simulator's replay of each cell) per variant, with the relative error
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
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                line, = ax.plot(xs, ys, marker="o", label=rest)
                ax.fill_between(xs, [y - p[2] for y, p in zip(ys, pts)], [y + p[2] for y, p in zip(ys, pts)],
                                color=line.get_color(), alpha=0.2)
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


def first_repeat(rows, variant):
    """The rows of a variant's lowest repeat (one cell: times on one clock)."""
    reps = sorted({int(r["repeat"]) for r in rows if r["variant"] == variant})
    return [r for r in rows if r["variant"] == variant and int(r["repeat"]) == reps[0]] if reps else []


def kv_over_time(steps, variants, out):
    shown = [v for v in variants if first_repeat(steps, v)]
    if not shown:
        return False
    fig, axes = plt.subplots(len(shown), 1, figsize=(10, 2.6 * len(shown)), squeeze=False, sharex=True)
    for ax, v in zip(axes[:, 0], shown):
        rows = first_repeat(steps, v)
        t = [num(r["start_s"]) + num(r["duration_s"]) for r in rows]
        for col, label in [("kv_blocks_used", "used"), ("kv_blocks_reserved", "reserved"),
                           ("kv_blocks_cached", "cached (free)")]:
            ax.step(t, [num(r[col]) for r in rows], where="post", label=label)
        ax.set_title(v, fontsize=9)
        ax.set_ylabel("KV blocks")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    axes[-1][0].set_xlabel("time since the engine's start (s)")
    fig.suptitle("KV cache blocks over time (repeat 0; steps.csv)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def request_timeline(requests, variants, out, sample=24):
    shown = [v for v in variants if first_repeat(requests, v)][:4]
    if not shown:
        return False
    fig, axes = plt.subplots(1, len(shown), figsize=(5 * len(shown), 6), squeeze=False)
    for ax, v in zip(axes[0], shown):
        rows = first_repeat(requests, v)
        step = max(1, len(rows) // sample)
        rows = rows[::step][:sample]
        for y, r in enumerate(rows):
            arrival, sched = num(r["arrival_s"]), num(r.get("first_scheduled_s"))
            first, fin = num(r["first_token_s"]), num(r["finish_s"])
            if sched is not None:
                ax.barh(y, sched - arrival, left=arrival, color="tab:gray", label="queued" if y == 0 else None)
                if first is not None:
                    ax.barh(y, first - sched, left=sched, color="tab:orange", label="prefill" if y == 0 else None)
            if first is not None and fin is not None:
                ax.barh(y, fin - first, left=first, color="tab:blue", label="decode" if y == 0 else None)
            if int(r["preemptions"]) > 0:
                end = fin if fin is not None else (first if first is not None else arrival)
                ax.plot(end, y, "rx")
                ax.annotate(f"{r['preemptions']}\u00d7 preempted", (end, y), fontsize=6, color="red")
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([r["request_id"] for r in rows], fontsize=6)
        ax.set_xlabel("time since the engine's start (s)")
        ax.set_ylabel("request id")
        ax.set_title(v, fontsize=9)
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Request timelines (repeat 0, every {step}th request)" if step > 1 else "Request timelines (repeat 0)")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def quality_tradeoff(vals, variants, out):
    pts = [v for v in variants if vals[v].get("perplexity") and vals[v].get("weights_bytes")]
    if not pts:
        return False
    metrics = [m for m in ("perplexity", "kl_vs_baseline") if any(vals[v].get(m) for v in pts)]
    fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.5), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        for v in pts:
            if not vals[v].get(m):
                continue
            x = mean_ci(vals[v]["weights_bytes"])[0] / 2**20
            y, half = mean_ci(vals[v][m])
            ax.errorbar([x], [y], yerr=[half], marker="o", capsize=3, linestyle="none")
            ax.annotate(v, (x, y), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel("weights (MiB)")
        ax.set_ylabel(m)
        ax.grid(alpha=0.3)
    fig.suptitle("Quality against weight bytes")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


def predicted_vs_measured(vals, variants, out):
    metrics = [m for m in ("ttft_ms_p50", "tpot_ms_p50", "throughput_out_tok_s")
               if any(vals[v].get("pred_" + m) for v in variants)]
    shown = [v for v in variants if any(vals[v].get("pred_" + m) for m in metrics)]
    if not metrics:
        return False
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4.2), squeeze=False)
    x = range(len(shown))
    for ax, m in zip(axes[0], metrics):
        meas = [mean_ci(vals[v][m]) if vals[v].get(m) else (0.0, 0.0) for v in shown]
        pred = [mean_ci(vals[v]["pred_" + m])[0] if vals[v].get("pred_" + m) else 0.0 for v in shown]
        ax.bar([i - 0.2 for i in x], [a for a, _ in meas], 0.4, yerr=[h for _, h in meas], capsize=3,
               color="tab:blue", label="measured")
        ax.bar([i + 0.2 for i in x], pred, 0.4, color="tab:orange", label="predicted")
        for i, v in enumerate(shown):
            errs = vals[v].get("pred_" + m + "_err")
            if errs:
                err = sum(errs) / len(errs)
                ax.annotate(f"{err * 100:+.0f}%", (i + 0.2, pred[i]), ha="center", va="bottom", fontsize=7,
                            color="tab:red" if m == "tpot_ms_p50" and abs(err) > 0.2 else "black")
        ax.set_xticks(list(x))
        ax.set_xticklabels(shown, rotation=30, ha="right", fontsize=7)
        ax.set_title(m, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Measured and predicted (calibrated simulator), relative error above each prediction")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return True


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
        requests = read_csv(req_path)
        latency_cdfs(requests, variants, os.path.join(figdir, "latency_cdf.png"))
        written.append("latency_cdf.png")
        if requests and "first_scheduled_s" in requests[0] and request_timeline(
                requests, variants, os.path.join(figdir, "request_timeline.png")):
            written.append("request_timeline.png")
    steps_path = os.path.join(run, "steps.csv")
    if os.path.exists(steps_path) and kv_over_time(read_csv(steps_path), variants,
                                                    os.path.join(figdir, "kv_blocks.png")):
        written.append("kv_blocks.png")
    vals = values_by(metrics, variants)
    if headline_bars(vals, variants, os.path.join(figdir, "headline.png")):
        written.append("headline.png")
    written += sweep_plots(vals, variants, figdir)
    if quality_tradeoff(vals, variants, os.path.join(figdir, "quality.png")):
        written.append("quality.png")
    if predicted_vs_measured(vals, variants, os.path.join(figdir, "predicted.png")):
        written.append("predicted.png")
    link_figures(run, written)
    for n in written:
        print(os.path.join(figdir, n))


if __name__ == "__main__":
    main()
