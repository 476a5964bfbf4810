"""The ``evaluate_hargo`` stage: the SFT start, every (method, seed) policy of ``rl_hargo``, every run of the
offline baselines (``offline.methods`` x ``offline.seeds``: DPO, KTO, SimPO) and of the HPC-GPT row answer the held-out
items of the task families, after the runs' own records (``final/run_record.json``) show one SFT start and one set of
rewards for all of them (``hpcrl_core/training/run_record.py``: a mismatch stops the stage, naming the run);
``reports/eval_hargo.json`` (DVC metrics: a block per method with each headline metric's
seed-mean, per-seed values and bootstrap interval), its markdown table, per-item samples and a plot.

MLflow: one run ``evaluate_hargo@<method>-<seed>`` per policy (tags ``comparison=hargo``, ``method``, ``seed``,
``kind=evaluation``) with that seed's metrics, beside the training runs ``rl_hargo@<method>-<seed>``; and the stage
run ``evaluate_hargo`` with the seed-means, the report, the table and the plot.

Run: ``python -m flows.evaluate_hargo [--params params.yaml] [--data data] [--sft checkpoints/sft_hargo/final]
[--runs checkpoints/rl_hargo] [--report reports/eval_hargo.json] [--offline checkpoints/offline]
[--hpcgpt checkpoints/hpcgpt]`` (what
``dvc repro evaluate_hargo`` runs).
Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

import tasks.evaluate_hargo as steps
from flows.stage import COMPARISON_TAG, flow_run_tags
from hpcrl_core import provenance, tracking
from hpcrl_core.config import HPCGPT, Params, load_params
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation import hargo
from hpcrl_core.evaluation.hargo_report import markdown_table, models
from hpcrl_core.training import run_record


def run_dirs(params: Params, runs_dir: Path, offline_dir: Path, hpcgpt_dir: Path) -> dict[str, dict[int, Path]]:
    """``{method: {seed: final model folder}}``: ``rl_hargo.methods`` x ``rl_hargo.seeds`` under ``runs_dir``, then
    ``offline.methods`` x ``offline.seeds`` under ``offline_dir``, then ``hpcgpt.seeds`` under ``hpcgpt_dir``.

    Raises:
        DataError: a run's ``final`` folder is missing (naming the DVC stages that make them).
    """
    rp = params.rl_hargo
    wanted = [(m, s, runs_dir, f"rl_hargo@{m}-{s}") for m in rp.methods for s in rp.seeds]
    op = params.offline
    wanted += [(m, s, offline_dir, f"offline@{m}-{s}") for m in op.methods for s in op.seeds]
    wanted += [(HPCGPT, s, hpcgpt_dir, f"hpcgpt@{s}") for s in params.hpcgpt.seeds]
    out: dict[str, dict[int, Path]] = {}
    missing = []
    for method, seed, folder, stage in wanted:
        final = folder / f"{method}-{seed}" / "final"
        try:
            provenance.check_model_dir(final)
        except ConfigError:
            missing.append(f"{stage} ({final})")
        out.setdefault(method, {})[seed] = final
    if missing:
        raise DataError(f"{len(missing)} runs of the comparison have no final model: {', '.join(missing[:5])}; run "
                        "`dvc repro evaluate_hargo` (it runs the stages they come from) first")
    return out


@flow(name="evaluate-hargo")
def evaluate_hargo(params_path: str = "params.yaml", data_dir: str = "data",
                   sft_dir: str = "checkpoints/sft_hargo/final", runs_dir: str = "checkpoints/rl_hargo",
                   report: str = "reports/eval_hargo.json", offline_dir: str = "checkpoints/offline",
                   hpcgpt_dir: str = "checkpoints/hpcgpt") -> dict:
    """Evaluate the start point and every run of the comparison; returns the report."""
    params = load_params(params_path)
    dirs = run_dirs(params, Path(runs_dir), Path(offline_dir), Path(hpcgpt_dir))
    shared = run_record.check_runs(Path(sft_dir), dirs)  # one start, one set of rewards, from the runs' own records
    notes: dict[str, str] = {}
    records = hargo.fitting_items(Path(sft_dir), hargo.load_items(Path(data_dir), params, notes), params, notes)
    if not records:
        raise DataError(f"no held-out items under {data_dir} ({notes}); run `dvc repro prepare` first")
    sft_rows = steps.evaluate_model(Path(sft_dir), records, params, "sft")
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for method, seeds in dirs.items():
        for seed, folder in seeds.items():
            runs.setdefault(method, {})[seed] = steps.evaluate_model(folder, records, params, f"{method}-{seed}")
    result = steps.comparison_report(sft_rows, runs, params, notes, Path(report), shared)
    _track(result, params, Path(report))
    get_run_logger().info("HARGO comparison (%s)\n%s", report, markdown_table(result))
    return result


def _track(result: dict[str, Any], params: Params, report: Path) -> None:
    for method in (m for m in models(result) if m != hargo.SFT):
        for seed, metrics in result[method]["runs"].items():
            tags = {**flow_run_tags(), **COMPARISON_TAG, "method": method, "seed": str(seed), "kind": "evaluation"}
            with tracking.dvc_stage_run(f"evaluate_hargo@{method}-{seed}", tags=tags, method=method, seed=seed):
                tracking.log_metrics(metrics)
    with tracking.dvc_stage_run("evaluate_hargo", params={"evaluate_hargo": params.evaluate_hargo.model_dump()},
                                tags={**flow_run_tags(), **COMPARISON_TAG, "kind": "evaluation"}):
        tracking.log_metrics({f"{block}.{name}": entry["mean"] for block, content in result.items() if block != "meta"
                              for name, entry in content["metrics"].items() if entry is not None})
        tracking.log_dict(result, "reports/eval_hargo.json")
        for path in (report.with_suffix(".md"), report.with_suffix(".png")):
            tracking.log_artifact(path, "reports")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--sft", default="checkpoints/sft_hargo/final")
    ap.add_argument("--runs", default="checkpoints/rl_hargo")
    ap.add_argument("--report", default="reports/eval_hargo.json")
    ap.add_argument("--offline", default="checkpoints/offline")
    ap.add_argument("--hpcgpt", default="checkpoints/hpcgpt")
    a = ap.parse_args(argv)
    evaluate_hargo(a.params, a.data, a.sft, a.runs, a.report, a.offline, a.hpcgpt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
