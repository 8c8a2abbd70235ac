#!/usr/bin/env python3
"""Checks that what README.md and docs/*.md name exists (ctest `docs.consistency`).

- paths and files: every repository path in a code span, a code block or a link
  (`scripts/test.sh`, `core/src/run/runner.cpp`, `kernels/cpu/matmul*.h`), and every bare source
  file name (`runner.cpp`), must be in the tree; links to `#anchors` must name a heading of
  their page; `../shared/...` paths are checked where the shared data is present;
- experiment keys: `[table] key` and dotted `table.key` / `--set table.key=value` mentions
  are checked against the key lists of the experiment parser itself, read from `inferlab
  validate`'s "unknown key ... allowed: ..." answer for each table, and plugin parameters
  (`scheduler.max_batch`) against `inferlab plugins`;
- commands: `inferlab CMD` in code must be a command of `inferlab --help`, and each `--flag`
  after it on the line an option in `inferlab CMD --help`;
- and the other way round, every key the parser allows is described in docs/experiment-format.md.

docs/history/ is not checked: it records what was true on its dates.
--self-test renames the first path, key, command and option the README names, one at a time,
and fails unless the check reports each rename (so the check cannot quietly pass everything).
Usage: check_docs.py --root SRC --inferlab BIN [--self-test]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

SOURCE_EXTS = (".cpp", ".h", ".cu", ".cuh", ".cmake", ".sh", ".py", ".toml")
# Files a run, a download or another project makes: named by the docs, never in the tree.
NOT_IN_TREE = {
    "config.toml", "summary.md", "metrics.csv", "metrics.json", "requests.csv", "manifest.json",
    "cm.toml", "quickstart_cm.toml", "experiment.toml",  # a run's outputs, a generic name
    "llama.cpp", "llama-vocab.cpp", "gptq.py", "convert_hf_to_gguf.py",  # other projects' files
    "serial.cpp", "serial_vs_sjf.toml",  # writing-a-plugin.md's example, written by the reader
}
# GGUF metadata keys (`llama.attention.head_count`, written without the architecture).
NOT_EXPERIMENT_KEYS = {"attention.head_count", "attention.head_count_kv", "attention.layer_norm_rms_epsilon"}
# Paths under these are run outputs, downloads or build folders, not tree files.
OUTPUT_PREFIXES = ("build", "results/", "models/", "/", "~", "$", "tl-", "smol-")
SHELL_SEPARATORS = re.compile(r"\s(?:\||&&|;|#|>)\s")

# The tables the parser checks and how to reach each with `inferlab validate --set` on
# BASE_EXPERIMENT; the probe key never exists.
TABLE_PROBES = {
    "": "zz_probe.a",
    "experiment": "experiment.zz_probe", "model": "model.zz_probe", "device": "device.zz_probe",
    "workload": "workload.zz_probe", "slo": "slo.zz_probe", "quality": "quality.zz_probe",
    "calibration": "calibration.zz_probe", "plugins": "plugins.zz_probe",
    "baseline": "baseline.zz_probe", "variant": "variant.0.zz_probe", "kv": "baseline.kv.zz_probe",
    "length": "workload.prompt_len.zz_probe",
}
# The smallest valid experiment with every table a probe goes through (a length table, a variant).
BASE_EXPERIMENT = """[experiment]
name = "zz_probe"
[model]
preset = "stories15m"
[workload]
num_requests = 1
prompt_len = { dist = "fixed", value = 8 }
[[variant]]
name = "zz_probe_variant"
"""
FREE_TABLES = {"sweep", "claim"}  # any key: a sweep's axes, a reproduction's claims
PLUGIN_KIND_OF = {"attention": "attention", "quantization": "quantization", "scheduler": "scheduling",
                  "decoding": "decoding"}


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, **kw)


class Facts:
    """What exists: the tree's files, the parser's keys, the CLI's commands and options."""

    def __init__(self, root, inferlab):
        self.root = root
        self.inferlab = inferlab
        git = run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root)
        files = git.stdout.split() if git.returncode == 0 else self._walk(root)
        self.files = set(files)
        self.dirs = {os.path.dirname(f) for f in files}
        for d in list(self.dirs):
            while d:
                d = os.path.dirname(d)
                self.dirs.add(d)
        self.basenames = {os.path.basename(f) for f in files}
        self.top = {f.split("/")[0] for f in files if "/" in f}
        self.keys = self._read_keys()
        self.commands, self.options = self._read_cli()
        self.plugin_params = self._read_plugin_params()
        data = os.environ.get("INFERLAB_DATA") or os.path.join(os.path.dirname(os.path.abspath(root)), "shared")
        self.data = data if os.path.isdir(data) else None

    @staticmethod
    def _walk(root):
        """The tree without git (a source archive): every file outside build folders and results."""
        out = []
        for d, subdirs, names in os.walk(root):
            rel = os.path.relpath(d, root)
            subdirs[:] = [s for s in subdirs if not s.startswith(("build", ".git")) and
                          not (rel == "." and s in ("results", "models"))]
            out += [os.path.normpath(os.path.join(rel, n)) for n in names]
        return out

    def _read_keys(self):
        keys = {}
        with tempfile.TemporaryDirectory() as tmp:
            base = os.path.join(tmp, "base.toml")
            with open(base, "w") as f:
                f.write(BASE_EXPERIMENT)
            for table, probe in TABLE_PROBES.items():
                out = run([self.inferlab, "validate", base, "--set", probe + "=1", "--log", "quiet"])
                m = re.search(r"unknown key 'zz_probe' in [^;]*; allowed: (.*)", out.stderr + out.stdout)
                if not m:
                    sys.exit(f"check_docs: cannot read the parser's keys of '{table or 'the file'}' from "
                             f"`inferlab validate --set {probe}=1`: {(out.stderr + out.stdout).strip()}")
                keys[table] = {k.strip() for k in m.group(1).split(",")}
        return keys

    def _read_cli(self):
        out = run([self.inferlab, "--help"])
        text = out.stdout + out.stderr
        commands = set(re.findall(r"^  ([a-z]+) ", text, re.M))
        if len(commands) < 5:
            sys.exit(f"check_docs: cannot read the commands of `inferlab --help`: {text.strip()}")
        options = {}
        for c in commands:
            h = run([self.inferlab, c, "--help"])
            options[c] = set(re.findall(r"--[a-z][a-z0-9-]*", h.stdout + h.stderr))
        return commands, options

    def _read_plugin_params(self):
        out = run([self.inferlab, "plugins", "--log", "quiet"])
        params, kind = {}, None
        for line in out.stdout.splitlines():
            m = re.match(r"^([a-z]+)/[a-z0-9_]+ ", line)
            if m:
                kind = m.group(1)
                continue
            m = re.match(r"^  ([a-z_0-9]+) \(", line)
            if m and kind:
                params.setdefault(kind, set()).add(m.group(1))
        if not params:
            sys.exit(f"check_docs: `inferlab plugins` listed no parameters: {out.stdout + out.stderr}")
        return params


def code_parts(text):
    """(line number, code) for each inline code span and each line of a fenced code block."""
    parts, fenced = [], False
    for no, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            parts.append((no, line, True))
        else:
            for span in re.findall(r"`([^`]+)`", line):
                parts.append((no, span, False))
    return parts


def slug(heading):
    """GitHub's anchor for a heading."""
    h = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return h.replace(" ", "-")


class Checker:
    def __init__(self, facts):
        self.f = facts
        self.problems = []
        self.seen = {"path": [], "key": [], "command": [], "option": []}  # what was checked, for --self-test

    def report(self, where, what):
        self.problems.append(f"{where}: {what}")

    # --- paths -------------------------------------------------------------------------------
    def path_exists(self, rel, base_dir):
        f = self.f
        p = rel.rstrip("/")
        if p.startswith("../shared/"):
            if not f.data:
                return True
            return os.path.exists(os.path.join(f.data, p.split("shared/", 1)[1]))
        if any(ch in p for ch in "*?["):
            rx = re.compile("^" + re.escape(p).replace(r"\*", "[^/]*").replace(r"\?", "[^/]") + "$")
            return any(rx.match(x) for x in f.files | f.dirs)
        # A module named without its extension (`kernels/cpu/matmul_gguf`) is its .h/.cpp pair.
        return p in f.files or p in f.dirs or any(x.startswith(p + ".") for x in f.files)

    def check_path_token(self, tok, where, base_dir):
        tok = tok.strip("'\",;:()[]").rstrip(".")
        if not tok or tok.startswith(OUTPUT_PREFIXES) or "<" in tok or "{" in tok or "=" in tok:
            return
        if not re.fullmatch(r"(\.\./)*[\w.*+-]+(/[\w.*+-]+)*/?", tok) or "CMakeFiles" in tok:
            return
        if any(re.fullmatch(r"[A-Z][A-Z_]*", part) for part in tok.split("/")):
            return  # a placeholder: DIR/config.toml, RUN_A
        first = tok.split("/")[0]
        name = os.path.basename(tok.rstrip("/"))
        if "/" in tok.rstrip("/") and (first in self.f.top or tok.startswith("../shared/")):
            self.seen["path"].append(tok)
            if not self.path_exists(tok, ""):
                self.report(where, f"path '{tok}' is not in the tree")
        elif "/" in tok and tok.endswith(SOURCE_EXTS) and "*" not in tok:
            # Relative to a plugin folder (`../continuous/continuous.h`) or an include path
            # (`inferlab/plugin/plugin.h`): some file in the tree must end so.
            tail = "/" + tok.lstrip("./")
            self.seen["path"].append(tok)
            if not any(("/" + x).endswith(tail) for x in self.f.files):
                self.report(where, f"path '{tok}' matches no file in the tree")
        elif "/" not in tok and name.endswith(SOURCE_EXTS) and len(name.split(".")[0]) > 0 \
                and tok not in NOT_IN_TREE and "*" not in tok:
            self.seen["path"].append(tok)
            if tok not in self.f.basenames:
                self.report(where, f"file '{tok}' is not in the tree")

    def check_links(self, doc, text, where_of):
        base_dir = os.path.dirname(doc)
        for no, line in enumerate(text.split("\n"), 1):
            for target in re.findall(r"\]\(([^)\s]+)\)", line):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                where = where_of(no)
                rel = os.path.normpath(os.path.join(base_dir, path)) if path else doc
                if path:
                    self.seen["path"].append(path)
                    if rel not in self.f.files and rel not in self.f.dirs:
                        self.report(where, f"link target '{target}' is not in the tree")
                        continue
                if anchor and rel.endswith(".md"):
                    with open(os.path.join(self.f.root, rel)) as fh:
                        heads = {slug(h) for h in re.findall(r"^#+ (.*)$", fh.read(), re.M)}
                    if anchor not in heads:
                        self.report(where, f"link '{target}': {rel} has no heading '#{anchor}'")

    # --- keys --------------------------------------------------------------------------------
    def check_dotted(self, key, where):
        if key in NOT_EXPERIMENT_KEYS:
            return
        parts = [p for p in key.split(".") if not p.isdigit()]
        k = self.f.keys
        head = parts[0]
        if head in FREE_TABLES:
            return
        if head in k[""]:
            table = head
        elif head in k["baseline"]:  # a stack key on its own: kv.x, scheduler.x
            parts = ["baseline"] + parts
            table = "baseline"
        else:
            return  # not an experiment key (a file name, a C++ member)
        if len(parts) < 2:
            return  # a table on its own (`variant=[...]`), not a key
        self.seen["key"].append(key)
        name = parts[1]
        if name not in k[table]:
            self.report(where, f"key '{key}': [{table}] has no '{name}' (the parser allows: "
                               f"{', '.join(sorted(k[table]))})")
            return
        if len(parts) < 3:
            return
        sub, leaf = name, parts[2]
        if table in ("baseline", "variant") and sub == "kv":
            allowed = k["kv"]
        elif table in ("baseline", "variant") and sub in PLUGIN_KIND_OF:
            # `name`, and a quantization's per-layer `rules` (quantization_rules.cpp).
            allowed = self.f.plugin_params.get(PLUGIN_KIND_OF[sub], set()) | {"name"}
            if sub == "quantization":
                allowed |= {"rules"}
        elif table == "workload" and sub in ("prompt_len", "output_len"):
            allowed = k["length"]
        else:
            return
        if leaf not in allowed:
            self.report(where, f"key '{key}': '{leaf}' is not a key of {sub} (allowed: {', '.join(sorted(allowed))})")

    def check_keys_in(self, code, where):
        m = re.match(r"^\[\[?([a-z_]+)\]\]?\s+([a-z_][a-z_0-9]*)\b", code)
        if m and m.group(1) in self.f.keys[""] and m.group(1) not in FREE_TABLES:
            table = m.group(1)
            self.seen["key"].append(f"[{table}] {m.group(2)}")
            if m.group(2) not in self.f.keys.get(table, set()):
                self.report(where, f"key '[{table}] {m.group(2)}' is not one the parser allows in [{table}]")
        for key in re.findall(r"--set\s+['\"]?([a-z_][\w.]*)=", code):
            self.check_dotted(key, where)
        m = re.fullmatch(r"([a-z_]+(?:\.[a-z_0-9]+)+)(\s*=.*)?", code.strip())
        if m and not re.search(r"\.(md|cpp|h|toml|sh|py|csv|json|gguf|bin|txt|so|cu|safetensors)$", m.group(1)):
            self.check_dotted(m.group(1), where)

    # --- commands ----------------------------------------------------------------------------
    def check_commands_in(self, code, where):
        for m in re.finditer(r"(?:^|[\s/(])inferlab\s+([a-z][a-z-]*)", code):
            cmd = m.group(1)
            if cmd in ("is", "and", "or", "the", "runs", "reads", "writes", "program"):
                continue  # prose inside a code span
            self.seen["command"].append(cmd)
            if cmd not in self.f.commands:
                self.report(where, f"command 'inferlab {cmd}' is not in `inferlab --help` "
                                   f"({', '.join(sorted(self.f.commands))})")
                continue
            rest = SHELL_SEPARATORS.split(code[m.end():])[0]
            for flag in re.findall(r"(?:^|\s)(--[a-z][a-z0-9-]*)", rest):
                self.seen["option"].append(flag)
                if flag not in self.f.options[cmd]:
                    self.report(where, f"'inferlab {cmd} {flag}': no such option in `inferlab {cmd} --help`")

    def check_doc(self, doc, text):
        where_of = lambda no: f"{doc}:{no}"  # noqa: E731
        self.check_links(doc, text, where_of)
        for no, code, fenced in code_parts(text):
            where = where_of(no)
            for tok in re.split(r"[\s,]+", code):
                self.check_path_token(tok, where, os.path.dirname(doc))
            if not fenced or "--set" in code:
                self.check_keys_in(code, where)
            self.check_commands_in(code, where)


def check_format_page(checker, text):
    """docs/experiment-format.md describes every key: each key of the parser's lists must appear
    in one of its code spans or blocks."""
    code = " ".join(c for _, c, _ in code_parts(text))
    words = set(re.findall(r"[a-z_][a-z_0-9]*", code))
    for table, keys in sorted(checker.f.keys.items()):
        for k in sorted(keys - words):
            checker.report("docs/experiment-format.md",
                           f"the parser's key '{k}' ({'[' + table + ']' if table else 'a top-level table'}) is not described")


def docs_of(root):
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    return {d: open(os.path.join(root, d)).read() for d in docs}


def self_test(facts, readme):
    first = Checker(facts)
    first.check_doc("README.md", readme)
    if first.problems:
        print("\n".join(first.problems))
        return 1
    failed = 0
    for kind in ("path", "key", "command", "option"):
        seen = [s for s in first.seen[kind] if s in readme]
        if not seen:
            print(f"self-test: the README names no {kind} to rename")
            failed = 1
            continue
        old = seen[0]
        if kind == "path":
            new = re.sub(r"(\.[a-z]+)?$", lambda m: "_renamed" + (m.group(1) or ""), old.rstrip("/"), count=1)
        elif kind == "key":
            new = old + "_renamed"
        elif kind == "option":
            new = old + "-renamed"
        else:
            new = old + "x"
        token = f"inferlab {old}" if kind == "command" else old
        mutated = readme.replace(token, f"inferlab {new}" if kind == "command" else new)
        c = Checker(facts)
        c.check_doc("README.md", mutated)
        caught = [p for p in c.problems if new in p]
        print(f"self-test: {kind} '{old}' renamed '{new}': " + (caught[0] if caught else "NOT CAUGHT"))
        failed |= not caught
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--inferlab", required=True)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    facts = Facts(os.path.abspath(a.root), a.inferlab)
    docs = docs_of(facts.root)
    if a.self_test:
        return self_test(facts, docs["README.md"])
    c = Checker(facts)
    for doc, text in docs.items():
        c.check_doc(doc, text)
    check_format_page(c, docs["docs/experiment-format.md"])
    for p in c.problems:
        print(p)
    n = {k: len(v) for k, v in c.seen.items()}
    print(f"check_docs: {len(docs)} pages, {n['path']} paths, {n['key']} keys, {n['command']} commands checked; "
          f"{len(c.problems)} problem(s)")
    return 1 if c.problems else 0


if __name__ == "__main__":
    sys.exit(main())
