"""The ``train-hargo`` pipeline: prepare → sft_hargo → hpcgpt (x seed) → rl_hargo (every method x seed) →
preferences → offline (DPO, KTO, SimPO x seed) → evaluate_hargo through ``dvc repro <stage>`` (DVC skips what did not
change), then the ``register`` flow with the ``registry_hargo`` policy (``hpcrl-hargo``: the hargo run of the first
seed; champion only when its WinRate beats the champion's); ends with the comparison table (``reports/eval_hargo.md``)
and the start point's bars.

Run: ``python -m flows.train_hargo [--stages prepare sft_hargo ...] [--no-register] [--repo-root PATH]``
(``make hargo``); as a deployment: ``make serve`` then ``prefect deployment run 'train-hargo/train-hargo'``.
Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.train_dgemm import check_dvc_stages, registry_line
from hpcrl_core.config import load_params
from hpcrl_core.evaluation.hargo_report import markdown_table
from hpcrl_core.evaluation.start_point import bars_line
from hpcrl_core.runtime_env import ROOT
from tasks.pipeline import run_dvc_stage

DEFAULT_DVC_STAGES = ("prepare", "sft_hargo", "hpcgpt", "rl_hargo", "preferences", "offline", "evaluate_hargo")
START_REPORT = "reports/sft_hargo.json"
REPORT = "reports/eval_hargo.json"
warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)


@flow(name="train-hargo")
def train_hargo(stages: tuple[str, ...] = DEFAULT_DVC_STAGES, register: bool = True,
                repo_root: str = str(ROOT)) -> dict:
    """Run the HARGO pipeline's DVC stages in order, then register the HARGO policy; returns the summary.

    Returns:
        ``{"repo_root", "dvc_stages": [{dvc_stage, status, seconds, ran, skipped}], "register": dict | None,
        "start_point": dict | None, "comparison": dict | None}``.
    """
    root = Path(repo_root).resolve()
    check_dvc_stages(root, stages)  # a matrix stage (rl_hargo, offline) runs every member: rl_hargo@<method>-<seed>
    results = [asdict(run_dvc_stage(dvc_stage, str(root))) for dvc_stage in stages]
    registered = _register(root) if register else None
    summary = {"repo_root": str(root), "dvc_stages": results, "register": registered,
               "start_point": _read(root / START_REPORT), "comparison": _read(root / REPORT)}
    get_run_logger().info("train-hargo summary\n%s", format_summary(summary))
    return summary


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def _register(root: Path) -> dict[str, Any]:
    from flows.register import register

    params = load_params(root / "params.yaml")
    seed = params.rl_hargo.seeds[0]
    return register(model_dir=str(root / f"checkpoints/rl_hargo/hargo-{seed}/final"), report=str(root / REPORT),
                    data_dir=str(root / "data"), params_path=str(root / "params.yaml"), section="registry_hargo")


def format_summary(summary: dict[str, Any]) -> str:
    """Stages and their seconds, the start point's bars, the comparison table and the registration."""
    lines = [f"train-hargo in {summary['repo_root']}", f"  {'stage':<18}{'result':<10}{'seconds':>9}"]
    lines += [f"  {s['dvc_stage']:<18}{s['status']:<10}{s['seconds']:>9.1f}" for s in summary["dvc_stages"]]
    start = summary["start_point"]
    lines.append("\nstart point: " + (bars_line(start) if start else f"{START_REPORT} missing"))
    comparison = summary["comparison"]
    lines.append("\n" + (markdown_table(comparison) if comparison else f"{REPORT} missing"))
    lines.append("\n" + registry_line(summary["register"]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", nargs="+", default=list(DEFAULT_DVC_STAGES), help="DVC stages to run, in order")
    ap.add_argument("--no-register", dest="register", action="store_false", help="skip the register flow")
    ap.add_argument("--repo-root", default=str(ROOT), help="repository holding dvc.yaml")
    a = ap.parse_args(argv)
    print(format_summary(train_hargo(tuple(a.stages), a.register, a.repo_root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
