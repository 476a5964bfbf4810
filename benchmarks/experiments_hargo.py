"""The HARGO paper's nine-method table, rerun here: SFT, HPC-GPT, PPO, DPO, GRPO, Dr.GRPO, SimPO, KTO and HARGO (with
its ablations B1 and B2), every method over several seeds from one SFT start, with mean +- sd over seeds, 95%
bootstrap intervals over items, and HARGO minus each method as a paired per-item bootstrap.

Run mode (the default): the ``train-hargo`` pipeline in a clone of this repository's HEAD under ``--workdir`` (DVC
skips what did not change, so a second call with more seeds trains only the new runs), with params.yaml overridden
for the seeds (``rl_hargo``, ``offline`` and ``hpcgpt``), the split (``prepare.split``: ``cleaned`` or the
paper-faithful ``raw``), and, to plug real inputs in, a model folder (``--model``: ``model.source: hf``) and
``--set`` JSON merged into the sections (e.g. ``{"prepare": {"sources": {"mlperf": ["hpcgpt:/data/task1_ml_perf.json"]
}}}``). Render mode (``--report``): only the table of an existing ``reports/eval_hargo.json``.

Writes the table to docs/experiments.md between markers (``--no-write``: prints only), with the command, the run time,
the split's twin counts (eval items whose question train also asks, per family: what the raw split leaves in), the
runs' shared start and rewards (``meta.provenance``, checked by evaluate_hargo from the runs' own records), the
paper's figures beside ours and a statement, per claim of the paper, of whether it holds here.

Run: ``.venv/bin/python benchmarks/experiments_hargo.py [--seeds 1 2 3] [--split cleaned|raw] [--model DIR]
[--set JSON] [--workdir experiments/hargo/<split>] [--report REPORT] [--no-write]``. Three seeds of every method take
about two hours on 2 cores (docs/experiments.md has the measured time).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_sections import write_section  # noqa: E402
from hpcrl_core.config import parse_params  # noqa: E402
from hpcrl_core.provenance import git_commit  # noqa: E402

DOC = ROOT / "docs" / "experiments.md"
MARKER = "experiments_hargo"
# the paper's row order, then its ablations; methods a report lacks are left out
ORDER = ("sft", "hpcgpt", "ppo", "dpo", "grpo", "dr_grpo", "simpo", "kto", "hargo", "hargo_b1", "hargo_b2")
LABELS = {"sft": "SFT", "hpcgpt": "HPC-GPT", "ppo": "PPO", "dpo": "DPO", "grpo": "GRPO", "dr_grpo": "Dr.GRPO",
          "simpo": "SimPO", "kto": "KTO", "hargo": "HARGO", "hargo_b1": "HARGO-B1", "hargo_b2": "HARGO-B2"}
COLUMNS = (("winrate", "WinRate"), ("race_f1", "race F1"), ("plp_similarity", "PLP sim."), ("mlperf_em", "MLPerf EM"),
           ("accuracy_race_fortran", "Fortran race acc."))
# the figures of the paper's table that its claims rest on, as fractions (the paper prints percentages)
PAPER: dict[tuple[str, str], float] = {("hargo", "winrate"): 0.5462, ("hargo", "race_f1"): 0.9130,
                                       ("hargo", "plp_similarity"): 0.8558, ("kto", "mlperf_em"): 0.2747,
                                       ("dpo", "accuracy_race_fortran"): 0.7325}
TWINS = ("eval_exact_twins_in_train", "eval_conflicting_twins_in_train", "eval_twins_moved_to_train")
FAMILIES = ("race_c", "race_fortran", "mlperf", "plp")


def methods(report: Mapping[str, Any]) -> list[str]:
    """The report's methods in the paper's order, then any others."""
    known = [m for m in ORDER if m in report]
    return known + sorted(m for m in report if m not in ORDER and m != "meta")


def seed_values(entry: Mapping[str, Any] | None) -> list[float]:
    return [] if entry is None else [float(v) for _, v in sorted(entry["seeds"].items(), key=lambda kv: str(kv[0]))]


def cell(entry: Mapping[str, Any] | None) -> str:
    """``mean ± sd [lo, hi]``: sd the sample standard deviation over seeds (blank with one seed), the interval the
    report's item bootstrap of the seed-mean."""
    if entry is None:
        return "-"
    values = seed_values(entry)
    spread = f" ± {statistics.stdev(values):.3f}" if len(values) > 1 else ""
    lo, hi = entry["ci"]
    return f"{entry['mean']:.3f}{spread} [{lo:.3f}, {hi:.3f}]"


def table(report: Mapping[str, Any]) -> list[str]:
    """One row per method: seeds, then each column's cell, with the paper's figure beside ours where it has one."""
    head = "| method | seeds | " + " | ".join(name for _, name in COLUMNS) + " |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 2)]
    for m in methods(report):
        block = report[m]
        cells = []
        for key, _ in COLUMNS:
            text = cell(block["metrics"].get(key))
            if (m, key) in PAPER:
                text += f" (paper {PAPER[(m, key)]:.4f})"
            cells.append(text)
        seeds = "-" if m == "sft" else ", ".join(str(s) for s in block["seeds"])  # one start, no seeds
        lines.append(f"| {LABELS.get(m, m)} | {seeds} | " + " | ".join(cells) + " |")
    return lines


def differences(report: Mapping[str, Any]) -> list[str]:
    """HARGO minus each method, per column: the paired per-item difference and its interval; ``*`` where it
    excludes 0."""
    vs = report["meta"].get("vs_reference") or {}
    if not vs:
        return ["(no HARGO runs in this report: no paired differences)"]
    lines = ["| HARGO minus | " + " | ".join(name for _, name in COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
    for m in (x for x in methods(report) if x in vs):
        cells = []
        for key, _ in COLUMNS:
            d = vs[m].get(key)
            cells.append("-" if d is None else
                         f"{d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]{'*' if d['excludes_zero'] else ''}")
        lines.append(f"| {LABELS.get(m, m)} | " + " | ".join(cells) + " |")
    return lines


def _means(report: Mapping[str, Any], key: str) -> dict[str, float]:
    return {m: float(report[m]["metrics"][key]["mean"]) for m in methods(report)
            if report[m]["metrics"].get(key) is not None}


def _best_claim(report: Mapping[str, Any], method: str, key: str, label: str) -> str:
    """Whether ``method`` has the highest mean on ``key``, and whether HARGO's paired intervals separate it."""
    means = _means(report, key)
    if method not in means or len(means) < 2:
        return f"- {label}: not measured here ({LABELS.get(method, method)} or its rivals have no runs)."
    top = max(means, key=lambda m: means[m])
    vs = report["meta"].get("vs_reference") or {}
    if method == "hargo":
        diffs = {m: vs[m][key] for m in vs if vs[m].get(key) is not None}
        separated = [m for m, d in diffs.items() if d["excludes_zero"] and d["diff"] > 0]
        if top == method and len(separated) == len(diffs):
            return f"- {label}: holds (HARGO {means[method]:.3f}, above every method with intervals excluding 0)."
        if top == method:
            rest = sorted(set(diffs) - set(separated))
            return (f"- {label}: HARGO has the highest mean ({means[method]:.3f}), but its paired interval holds 0 "
                    f"against {', '.join(LABELS.get(m, m) for m in rest)}: not separated at this scale.")
        d = diffs.get(top)
        name = LABELS.get(top, top)
        if d is not None and d["excludes_zero"]:
            return (f"- {label}: does not hold; {name} is above HARGO ({means[top]:.3f} vs {means[method]:.3f}; "
                    f"HARGO minus {name} {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}], excluding 0).")
        paired = "" if d is None else f"; HARGO minus {name} {d['diff']:+.3f} [{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}]"
        return (f"- {label}: not shown; {name} has the highest mean ({means[top]:.3f} vs HARGO {means[method]:.3f}"
                f"{paired}, holding 0).")
    against = vs.get(method, {}).get(key)
    paired = "" if against is None else (f"; HARGO minus {LABELS.get(method, method)} {against['diff']:+.3f} "
                                         f"[{against['ci'][0]:+.3f}, {against['ci'][1]:+.3f}]")
    verdict = "has the highest mean" if top == method else f"does not hold; {LABELS.get(top, top)} is highest"
    return f"- {label}: {verdict} ({LABELS.get(method, method)} {means[method]:.3f}){paired}."


def claims(report: Mapping[str, Any]) -> list[str]:
    """One line per claim of the paper's table, measured on this report."""
    lines = [_best_claim(report, "hargo", "winrate", "HARGO best on WinRate (paper 54.62)"),
             _best_claim(report, "hargo", "race_f1", "HARGO best on race F1 (paper 91.30)"),
             _best_claim(report, "hargo", "plp_similarity", "HARGO best on PLP similarity (paper 0.8558)"),
             _best_claim(report, "kto", "mlperf_em", "KTO best on MLPerf EM (paper 27.47)")]
    fortran = _means(report, "accuracy_race_fortran")
    if "dpo" in fortran and len(fortran) > 1:
        low = min(fortran, key=lambda m: fortran[m])
        sft = fortran.get("sft")
        base = "" if sft is None else f", SFT {sft:.3f}"
        verdict = "holds (lowest)" if low == "dpo" else f"does not hold; {LABELS.get(low, low)} is lowest"
        lines.append(f"- DPO collapses on Fortran races (paper 73.25%): {verdict} (DPO {fortran['dpo']:.3f}{base}).")
    else:
        lines.append("- DPO collapses on Fortran races (paper 73.25%): not measured here (no DPO runs).")
    return lines


def twin_counts(data_dir: Path) -> list[str]:
    """Per family, eval items whose question train also asks (from the data cards), or nothing without cards."""
    rows = []
    for family in FAMILIES:
        try:
            hygiene = json.loads((data_dir / family / "card.json").read_text())["hygiene"]
        except (OSError, ValueError, KeyError):
            continue
        rows.append(f"| {family} | {hygiene.get('split', '?')} | {hygiene.get('eval', '?')} | "
                    + " | ".join(str(hygiene.get(k, 0)) for k in TWINS) + " |")
    if not rows:
        return []
    return ["| family | split | eval items | exact twin in train | conflicting twin in train | moved to train |",
            "|---|---|---|---|---|---|", *rows]


def section(report: Mapping[str, Any], *, command: str, seconds: float | None, commit: str,
            data_dir: Path | None) -> str:
    """The markdown written between the markers."""
    meta = report["meta"]
    shared = meta.get("provenance")
    if shared:
        start = (f"Every run's own record names one start (`{str(shared['start'])[:19]}...`) and one set of rewards "
                 f"(`{str(shared['rewards_hash'])[:19]}...`; {shared['runs']} runs, checked by evaluate_hargo).")
    else:
        start = "The report carries no run records (rebuilt from samples?): the shared start was not checked."
    took = "not measured (rendered from an existing report)" if seconds is None else f"{seconds / 60:.0f} min"
    items = ", ".join(f"{k} {v}" for k, v in meta["items"].items())
    out = [f"### {datetime.now(UTC):%Y-%m-%d} · The nine-method table (`benchmarks/experiments_hargo.py`)", "",
           f"- Commit {commit}. Command: `{command}`. Run time: {took}.",
           f"- Held-out items: {items}. Cells: mean ± sd over seeds [95% bootstrap interval of the seed-mean over "
           "items]; sd left out with one seed. The paper's figures (one run each, no intervals) in brackets after "
           "ours.",
           f"- {start}", "", *table(report), "",
           "Paired per-item bootstrap, HARGO minus each method (`*`: the interval excludes 0):", "",
           *differences(report), "", "What the paper's claims come to here:", "", *claims(report)]
    twins = [] if data_dir is None else twin_counts(data_dir)
    if twins:
        out += ["", "Eval items whose question train also asks (data cards):", "", *twins]
    return "\n".join(out)


def merged(base: dict[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with each section of ``overrides`` merged into it, one level deep."""
    out = dict(base)
    for name, values in overrides.items():
        out[name] = {**(out.get(name) or {}), **values} if isinstance(values, dict) else values
    return out


def overrides(seeds: Sequence[int], split: str, model: str | None, extra: Mapping[str, Any]) -> dict[str, Any]:
    """The params sections this invocation sets: seeds of every trained method, the split, the model."""
    out: dict[str, Any] = {"rl_hargo": {"seeds": list(seeds)}, "offline": {"seeds": list(seeds)},
                           "hpcgpt": {"seeds": list(seeds)}, "prepare": {"split": split}}
    if model:
        out["model"] = {"source": "hf", "hf": {"path": str(Path(model).resolve())}}
    for name, values in extra.items():
        out[name] = {**out.get(name, {}), **values} if isinstance(values, dict) else values
    return out


def prepare_workdir(workdir: Path, params_overrides: Mapping[str, Any]) -> None:
    """A clone of HEAD in ``workdir`` (made once) sharing this checkout's virtual environment, with params.yaml
    overridden; the overrides are validated before anything runs."""
    if not (workdir / ".git").is_dir():
        workdir.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--quiet", str(ROOT), str(workdir)], check=True)
    else:  # the pipeline's code is HEAD's: update an existing clone
        subprocess.run(["git", "-C", str(workdir), "fetch", "--quiet", str(ROOT), "HEAD"], check=True)
        subprocess.run(["git", "-C", str(workdir), "checkout", "--quiet", "--force", "FETCH_HEAD"], check=True)
    venv = workdir / ".venv"
    if not venv.exists():
        venv.symlink_to(ROOT / ".venv")
    path = workdir / "params.yaml"
    text = merged(yaml.safe_load(path.read_text()) or {}, params_overrides)
    parse_params(text)  # a bad override stops here
    path.write_text(yaml.safe_dump(text, sort_keys=False))


def run_pipeline(workdir: Path) -> float:
    """``python -m flows.train_hargo --no-register`` in ``workdir``; returns its wall time in seconds."""
    t0 = time.monotonic()
    env = {**os.environ, "PYTHONPATH": str(workdir)}
    subprocess.run([str(workdir / ".venv" / "bin" / "python"), "-m", "flows.train_hargo", "--no-register",
                    "--repo-root", str(workdir)], cwd=workdir, env=env, check=True)
    return time.monotonic() - t0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--split", choices=("cleaned", "raw"), default="cleaned")
    ap.add_argument("--model", default=None, help="a local Hugging Face model folder (model.source: hf)")
    ap.add_argument("--set", default="{}", help="JSON merged into params.yaml's sections, one level deep")
    ap.add_argument("--workdir", default=None, help="default: experiments/hargo/<split>")
    ap.add_argument("--report", default=None, help="render this eval_hargo.json only; run nothing")
    ap.add_argument("--no-write", action="store_true", help="print the section; leave docs/experiments.md alone")
    a = ap.parse_args(argv)
    command = "benchmarks/experiments_hargo.py " + " ".join(shlex.quote(x) for x in (argv or sys.argv[1:]))
    code = ROOT  # the checkout whose code made the figures
    if a.report:
        report_path, seconds, data_dir = Path(a.report), None, Path(a.report).resolve().parents[1] / "data"
    else:
        workdir = Path(a.workdir or ROOT / "experiments" / "hargo" / a.split).resolve()
        prepare_workdir(workdir, overrides(a.seeds, a.split, a.model, json.loads(a.set)))
        seconds = run_pipeline(workdir)
        report_path, data_dir, code = workdir / "reports" / "eval_hargo.json", workdir / "data", workdir
    report = json.loads(report_path.read_text())
    text = section(report, command=command, seconds=seconds, commit=git_commit(code)[:7], data_dir=data_dir)
    print(text)
    if not a.no_write:
        write_section(DOC, MARKER, text, "## The HARGO table", "# Experiments")
        print(f"\nwritten to {DOC.relative_to(ROOT)} between the {MARKER} markers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
