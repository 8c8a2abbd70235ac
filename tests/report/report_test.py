#!/usr/bin/env python3
"""`inferlab plot` and `inferlab report` end to end, the page checked in headless Chromium.

Runs small versions of the quickstart (twice, seeds 1 and 2, for a comparison), a [sweep] of
it, and experiments/kv_formats_stories260k.toml (quality: perplexity against weight bytes);
plots each and checks one PNG of every kind (its size, and that it is not blank); writes
report.html of the quickstart, of the quality run and of both quickstarts, and loads each in
Chromium: the DOM after the page's script ran (summary table, figures as data: images, the
manifest table filled, the comparison), no console message, and no request leaving file:.
Screenshots are kept under BUILD/test-artifacts/report/. Exit 77 (skip) without matplotlib or
Chromium, unless $CI is set (setup.sh --test installs both): then it fails.
"""
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

BUILD = os.path.abspath(sys.argv[1])
SOURCE = os.path.abspath(sys.argv[2])
INFERLAB = os.path.join(BUILD, "bin", "inferlab")
ART = os.path.join(BUILD, "test-artifacts", "report")
# Requests Chromium makes for itself (clock, component updates, accounts), not for the page.
OWN_HOSTS = re.compile(r"^https?://([\w.-]+\.)?(google\.com|googleapis\.com|gvt1\.com)(/|$)")


def skip(why):
    if os.environ.get("CI"):
        sys.exit(f"report_test: FAILED: {why} (CI is set, so this is a failure, not a skip)")
    print(f"report_test: SKIPPED: {why}")
    sys.exit(77)


def fail(why):
    sys.exit(f"report_test: FAILED: {why}")


# The runs' calibration cache (pred_* columns): the test's own, filled by a quick calibrate.
ENV = dict(os.environ)


def inferlab(*args):
    p = subprocess.run([INFERLAB, *args], cwd=SOURCE, capture_output=True, text=True, timeout=600, env=ENV)
    if p.returncode != 0:
        fail(f"inferlab {' '.join(args)} exited {p.returncode}: {p.stderr.strip()[-2000:]}")
    return p.stdout


def run(config, out, *sets):
    args = ["run", config, "--out", out, "--no-report"]
    for s in sets:
        args += ["--set", s]
    inferlab(*args)
    exp = os.path.join(out, os.listdir(out)[0])
    return os.path.join(exp, sorted(os.listdir(exp))[-1])


def check_png(path):
    """Width and height from the IHDR; not blank: many distinct colours over the image."""
    import matplotlib.image as mpimg
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    w, h = struct.unpack(">II", head[16:24])
    if w < 400 or h < 250:
        fail(f"{path}: {w}x{h}, smaller than a figure")
    img = mpimg.imread(path)
    flat = img.reshape(-1, img.shape[-1])
    colours = len({tuple(px) for px in flat[:: max(1, len(flat) // 20000)]})
    if colours < 8 or float(img.std()) < 0.02:
        fail(f"{path}: blank ({colours} colours, std {img.std():.4f})")


def chromium(exe, page, *extra):
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    try:
        p = subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            f"--user-data-dir={profile}", "--disable-background-networking", "--disable-sync",
                            "--disable-component-update", "--host-resolver-rules=MAP * ~NOTFOUND",
                            "--enable-logging=stderr", "--v=1", *extra, "file://" + page],
                           capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    console = [line for line in p.stderr.splitlines() if ":CONSOLE" in line]
    requests = [m.group(1) for m in re.finditer(r"NotifyBeforeURLRequest: (\S+)", p.stderr)]
    requests = [u for u in requests if not u.startswith(("file:", "data:")) and not OWN_HOSTS.match(u)]
    return p.stdout, console, requests


def check_page(exe, page, name, figures, runs, predicted=0):
    html = open(page).read()
    remote = re.findall(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
    if remote:
        fail(f"{page}: links out of the page: {remote[:3]}")
    dom, console, requests = chromium(exe, page, "--dump-dom")
    if console:
        fail(f"{page}: console messages: {console[:3]}")
    if requests:
        fail(f"{page}: network requests: {requests[:3]}")
    if dom.count('<table class="summary sortable"') != runs:
        fail(f"{page}: {runs} summary table(s) expected")
    imgs = len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom))
    if imgs < figures:
        fail(f"{page}: {imgs} figure(s), expected at least {figures}")
    if dom.count("<td>git_commit</td>") != runs:  # the manifest tables, filled by the page's script
        fail(f"{page}: the manifest table was not rendered")
    if runs > 1 and '<table class="comparison sortable"' not in dom:
        fail(f"{page}: no comparison table")
    tables = dom.count('<table class="prediction sortable"')
    if tables != predicted:
        fail(f"{page}: {tables} predicted-vs-measured table(s), expected {predicted}")
    if predicted and len(re.findall(r'<table class="prediction sortable">.*?</table>', dom, flags=re.S)[0]
                         .split("<tr")) < 5:  # the header and a row per quickstart variant
        fail(f"{page}: the predicted-vs-measured table lacks the variants' rows")
    shot = os.path.join(ART, name + ".png")
    chromium(exe, page, f"--screenshot={shot}", "--window-size=1400,2600")
    if not os.path.exists(shot) or os.path.getsize(shot) < 20000:
        fail(f"{shot}: no readable screenshot")
    check_png(shot)


def main():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # The Python `inferlab plot` would use: Debian's, where another one ran this script.
        if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3", *sys.argv])
        skip("python3 has no matplotlib (scripts/setup.sh --test installs python3-matplotlib)")
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        skip("no chromium on PATH (scripts/setup.sh --test installs Debian's chromium)")
    shutil.rmtree(ART, ignore_errors=True)
    os.makedirs(ART)
    work = tempfile.mkdtemp(prefix="report-test-")
    try:
        # A coarse calibration of the quickstart's stacks on this machine: its runs get pred_*
        # columns and their pages the predicted-vs-measured table (the quality run's model has
        # none, so its page has no such table).
        ENV["XDG_CACHE_HOME"] = os.path.join(work, "cache")
        inferlab("calibrate", "experiments/quickstart.toml", "--prefill", "8,64", "--batch", "1,4", "--context",
                 "16,64", "--repeats", "1", "--out", os.path.join(work, "cm.toml"))
        small = ["workload.num_requests=12", "experiment.repeats=2"]
        quick = run("experiments/quickstart.toml", os.path.join(work, "q1"), *small)
        quick2 = run("experiments/quickstart.toml", os.path.join(work, "q2"), *small, "experiment.seed=2")
        sweep_toml = os.path.join(work, "sweep.toml")
        with open(os.path.join(SOURCE, "experiments/quickstart.toml")) as f:
            base = re.split(r"\n\[\[variant\]\]", f.read())[0]
        with open(sweep_toml, "w") as f:
            f.write(base.replace('name = "quickstart"', 'name = "sweep"') +
                    '\n[sweep]\n"scheduler.max_batch" = [2, 8]\n"kv.block_size" = [8, 16]\n')
        sweep = run(sweep_toml, os.path.join(work, "s"), "workload.num_requests=8", "experiment.repeats=2")
        quality = run("experiments/kv_formats_stories260k.toml", os.path.join(work, "k"))
        for r in (quick, quick2, sweep, quality):
            inferlab("plot", r)
        kinds = {quick: ["latency_cdf", "headline", "kv_blocks", "request_timeline", "predicted"],
                 sweep: ["sweep_scheduler.max_batch", "sweep_kv.block_size"], quality: ["quality"]}
        for r, names in kinds.items():
            for n in names:
                path = os.path.join(r, "figures", n + ".png")
                if not os.path.exists(path):
                    fail(f"{path}: not written; figures: {os.listdir(os.path.join(r, 'figures'))}")
                check_png(path)
                shutil.copy(path, os.path.join(ART, n + ".png"))
        for r in (quick, sweep, quality):
            lines = open(os.path.join(r, "steps.csv")).read().splitlines()
            if len(lines) < 10 or not lines[0].startswith("variant,repeat,step,start_s"):
                fail(f"{r}/steps.csv: {len(lines)} lines")
        inferlab("report", quick, "--no-plot")
        check_page(exe, os.path.join(quick, "report.html"), "quickstart", 5, 1, predicted=1)
        inferlab("report", quality, "--no-plot")
        check_page(exe, os.path.join(quality, "report.html"), "kv_formats_stories260k", 1, 1)
        both = os.path.join(work, "both.html")
        inferlab("report", quick, quick2, "--no-plot", "--out", both)
        check_page(exe, both, "quickstart_two_runs", 10, 2, predicted=2)
        # The checks can fail: a page that fetches or logs is caught.
        bad = os.path.join(work, "bad.html")
        with open(bad, "w") as f:
            f.write('<html><body><img src="http://example.com/x.png"><script>console.error("x")</script></body></html>')
        _, console, requests = chromium(exe, bad, "--dump-dom")
        if not console or not any("example.com" in u for u in requests):
            fail(f"the control page's console message or request went unseen ({console}, {requests})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"report_test: ok; screenshots and figures in {ART}")


if __name__ == "__main__":
    main()
