"""When each DGEMM RL run first sampled a fast kernel, and whether it kept it, beside what its held-out evaluation
found: tells a run that never found a fast kernel from one that found it late or lost it
(``hpcrl_core/evaluation/discovery.py``).

A run folder is one of ``benchmarks/experiments_dgemm.py``'s (``<variant>-sft<S>-s<seed>/``, holding
``rl/final/log_history.json`` and ``eval_dgemm.json``) or an RL final folder (``checkpoints/rl_dgemm/final``, its
evaluation then read from ``reports/eval_dgemm.json`` beside the checkpoints when ``--report`` names it). Prints one
row per run (training: verdict, first step at ``--threshold`` x numpy, best and tail best; held-out: best vs numpy,
oracle ratio, ratio on problems permitting 4-5 techniques, distinct kernels) and, per verdict, how many runs met the
held-out bars on the fast kernels (best >= 0.8x numpy and 4-5-technique ratio >= 0.6).

Run: ``.venv/bin/python benchmarks/rl_discovery.py experiments/dgemm/*-s*/ [--threshold 0.8]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpcrl_core.errors import DataError  # noqa: E402
from hpcrl_core.evaluation.discovery import THRESHOLD, VERDICTS, Discovery, discovery, read_history  # noqa: E402
from hpcrl_core.evaluation.targets import fast_bars_met  # noqa: E402


def report_of(folder: Path, report: Path | None = None) -> Path | None:
    """The evaluation report of the run in ``folder``: ``report`` when given, else its ``eval_dgemm.json`` (None when
    there is none)."""
    beside = folder / "eval_dgemm.json"
    return report if report is not None else (beside if beside.is_file() else None)


def _f(value: Any, fmt: str = ".2f") -> str:
    return "-" if value is None else format(value, fmt)


def row(name: str, d: Discovery, rl: dict[str, Any] | None) -> str:
    held = (["-"] * 5 if rl is None else
            [_f(rl.get("best_vs_numpy")), _f(rl.get("oracle_ratio")), _f(rl.get("oracle_ratio_rich")),
             _f(rl.get("distinct_kernels"), "d"), "met" if fast_bars_met(rl) else "missed"])
    return (f"| {name} | {d.steps} | {d.verdict} | {_f(d.first_step, 'd')} | {d.best:.2f} | {d.tail_best:.2f} | "
            + " | ".join(held) + " |")


def summary(found: list[tuple[Discovery, dict[str, Any] | None]]) -> list[str]:
    lines = []
    for verdict in VERDICTS:
        runs = [rl for d, rl in found if d.verdict == verdict]
        judged = [rl for rl in runs if rl is not None]
        met = sum(fast_bars_met(rl) for rl in judged)
        lines.append(f"- {verdict}: {len(runs)} runs; fast-kernel bars met in {met} of the {len(judged)} evaluated")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="experiments run folders or RL final folders")
    ap.add_argument("--threshold", type=float, default=THRESHOLD, help="fast = this fraction of numpy (default 0.8)")
    ap.add_argument("--report", type=Path, default=None, help="the evaluation report, when a single RL final "
                    "folder is given (reports/eval_dgemm.json)")
    a = ap.parse_args(argv)
    if a.report is not None and len(a.runs) != 1:
        ap.error("--report goes with exactly one run folder")
    print(f"| run | steps | verdict (>= {a.threshold}x numpy) | first step | best | tail best | held-out best vs "
          "numpy | oracle ratio | 4-5 techniques | distinct | fast-kernel bars |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    found = []
    for folder in a.runs:
        try:
            d = discovery(read_history(folder), a.threshold)
        except DataError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        report = report_of(folder, a.report)
        rl = json.loads(report.read_text())["rl"] if report is not None else None
        found.append((d, rl))
        print(row(str(folder) if folder.name == "final" else f"{folder.parent.name}/{folder.name}", d, rl))
    print()
    print("\n".join(summary(found)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
