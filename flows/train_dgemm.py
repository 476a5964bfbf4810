"""The ``train-dgemm`` pipeline: prepare → sft → rl_dgemm → evaluate_dgemm through ``dvc repro <stage>`` (DVC skips
stages whose inputs did not change), then the ``register`` flow as a subflow; ends with a summary table (stages
ran / skipped and their seconds, SFT vs RL on the fixed headline of ``hpcrl_core.evaluation.report``: verified
and respect rates, median / best GFLOPS, best vs numpy, WinRate, oracle ratio (all and 4-5 techniques), headroom
closed, distinct kernels, and the oracle's coverage; the SFT policy's task scores; the registered version).

Run: ``python -m flows.train_dgemm [--stages prepare sft ...] [--no-register] [--repo-root PATH]``; as a
deployment: ``make serve`` then ``prefect deployment run 'train-dgemm/train-dgemm'`` (docs/orchestration.md).
Test: ``pytest tests/flows/test_train_dgemm_flow.py``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from dataclasses import asdict
from pathlib import Path
from typing import Any

import yaml
from prefect import flow, get_run_logger

from hpcrl_core.errors import ConfigError
from hpcrl_core.evaluation.report import headline, oracle_line, text_table
from hpcrl_core.runtime_env import ROOT
from tasks.pipeline import run_dvc_stage

DEFAULT_DVC_STAGES = ("prepare", "sft", "rl_dgemm", "evaluate_dgemm")
REPORTS = {"sft": "reports/sft.json", "rl": "reports/eval_dgemm.json"}
# Prefect validates parameters with a pydantic model whose `register` field shadows the ABC method: harmless.
warnings.filterwarnings("ignore", message='Field name "register"', category=UserWarning)


@flow(name="train-dgemm")
def train_dgemm(stages: tuple[str, ...] = DEFAULT_DVC_STAGES, register: bool = True,
                repo_root: str = str(ROOT)) -> dict:
    """Run the DGEMM pipeline's DVC stages in order, then register the model; returns the summary.

    Args:
        stages: DVC stages to reproduce, in order (each with the upstream stages DVC finds changed).
        register: run the ``register`` flow after the stages.
        repo_root: the repository holding ``dvc.yaml`` (default: this checkout).

    Returns:
        ``{"repo_root", "dvc_stages": [{dvc_stage, status, seconds, ran, skipped}], "register": dict | None,
        "reports": {"sft": {path, found, report}, "rl": {...}}}``.
    """
    root = Path(repo_root).resolve()
    check_dvc_stages(root, stages)
    results = [asdict(run_dvc_stage(dvc_stage, str(root))) for dvc_stage in stages]
    registered = _register(root) if register else None
    summary = {"repo_root": str(root), "dvc_stages": results, "register": registered, "reports": read_reports(root)}
    get_run_logger().info("train-dgemm summary\n%s", format_summary(summary))
    return summary


def check_dvc_stages(root: Path, stages: tuple[str, ...]) -> None:
    """Fail before running anything when a stage is not in ``dvc.yaml`` (stages of other dvc.yaml files pass)."""
    try:
        known = list((yaml.safe_load((root / "dvc.yaml").read_text()) or {}).get("stages", {}))
    except OSError as exc:
        raise ConfigError(f"no dvc.yaml in {root}: {exc}",
                          [f"repo_root: received {root}; allowed: a repository holding dvc.yaml"]) from exc
    unknown = [s for s in stages if ":" not in s and s not in known]
    if unknown:
        raise ConfigError(f"stages not in {root / 'dvc.yaml'}", [f"stages: received {s!r}; allowed: {', '.join(known)}"
                                                                  for s in unknown])


def _register(root: Path) -> dict[str, Any]:
    # Imported here: the register flow (and MLflow behind it) is only needed when registering.
    from flows.register import register

    return register(model_dir=str(root / "checkpoints/rl_dgemm/final"), report=str(root / REPORTS["rl"]),
                    data_dir=str(root / "data"), params_path=str(root / "params.yaml"))


def read_reports(root: Path) -> dict[str, dict[str, Any]]:
    """Each report's path, whether it exists, and its content (a missing or unreadable file is noted)."""
    out: dict[str, dict[str, Any]] = {}
    for key, rel in REPORTS.items():
        path = root / rel
        entry: dict[str, Any] = {"path": rel, "found": path.is_file(), "report": None}
        if entry["found"]:
            try:
                entry["report"] = json.loads(path.read_text())
            except (OSError, ValueError) as exc:
                entry["error"] = f"unreadable: {exc}"
        out[key] = entry
    return out


def format_summary(summary: dict[str, Any]) -> str:
    """A short plain-text table of the run: stages, the fixed headline (``evaluation.report``), registration."""
    lines = [f"train-dgemm in {summary['repo_root']}", f"  {'stage':<18}{'result':<10}{'seconds':>9}"]
    lines += [f"  {s['dvc_stage']:<18}{s['status']:<10}{s['seconds']:>9.1f}" for s in summary["dvc_stages"]]
    reports = summary["reports"]
    lines += ["", text_table(headline(reports["sft"]["report"], reports["rl"]["report"])),
              "  " + oracle_line(reports["rl"]["report"])]
    lines.append("\n  " + registry_line(summary["register"]))
    for entry in reports.values():
        state = "missing (its stage has not run here)" if not entry["found"] else entry.get("error", "read")
        lines.append(f"  {entry['path']}: {state}")
    return "\n".join(lines)


def registry_line(reg: dict[str, Any] | None) -> str:
    """One line on the registration: version, aliases, whether it became champion (or that none was asked)."""
    if reg is None:
        return "registry: not asked (--no-register)"
    return (f"registry: {reg.get('name')} version {reg.get('version')}, aliases "
            f"{', '.join(reg.get('aliases') or []) or '-'}; promoted to champion: "
            f"{'yes' if reg.get('promoted') else 'no'} (champion version {reg.get('champion_version')})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", nargs="+", default=list(DEFAULT_DVC_STAGES), help="DVC stages to run, in order")
    ap.add_argument("--no-register", dest="register", action="store_false", help="skip the register flow")
    ap.add_argument("--repo-root", default=str(ROOT), help="repository holding dvc.yaml")
    a = ap.parse_args(argv)
    summary = train_dgemm(tuple(a.stages), a.register, a.repo_root)
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
