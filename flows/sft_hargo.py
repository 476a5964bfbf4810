"""The ``sft_hargo`` stage: the HARGO start point. SFT on ``sft_hargo.families`` with its repetition, budget and tiny
model size; checkpoints to ``checkpoints/sft_hargo`` (resumed after a crash
when the inputs are unchanged); then its held-out report ``reports/sft_hargo.json``, which states the bars a start
point must reach (``hpcrl_core/evaluation/start_point.py``) and whether it does; curves and report to MLflow.

Run: ``python -m flows.sft_hargo [--params params.yaml] [--data data] [--out checkpoints/sft_hargo]
[--report reports/sft_hargo.json]`` (what ``dvc repro sft_hargo`` runs).
Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.resumable import resumable_dvc_stage
from hpcrl_core import tracking
from hpcrl_core.config import load_params
from hpcrl_core.evaluation.report import samples_path_for
from hpcrl_core.evaluation.start_point import bars_line
from tasks.sft_hargo import evaluate_start_point, run_sft_hargo


@flow(name="sft-hargo")
def sft_hargo(params_path: str = "params.yaml", data_dir: str = "data", out_dir: str = "checkpoints/sft_hargo",
              report: str = "reports/sft_hargo.json") -> dict:
    """Train (or resume) the HARGO start point and report it; returns losses, steps, the final folder, the report."""
    params = load_params(params_path)
    data, out = Path(data_dir), Path(out_dir)
    files = [data / f / name for f in params.sft_hargo.families for name in ("train.jsonl", "eval.jsonl")]
    settings = {"sft_hargo": params.sft_hargo.model_dump(), "model": params.model.model_dump()}
    log = get_run_logger()
    with resumable_dvc_stage("sft_hargo", out, files, settings, method="sft", data=files):
        result = run_sft_hargo(params, data, out, report_to=["mlflow"])
        tracking.log_metrics({k: v for k, v in result.items() if k in ("train_loss", "eval_loss", "global_step")})
        metrics = evaluate_start_point(Path(result["final_dir"]), data, params, Path(report))
        tracking.log_metrics({f"start.{k}": v for k, v in metrics.items() if isinstance(v, int | float)})
        tracking.log_dict(metrics, "reports/sft_hargo.json")
        tracking.log_artifact(samples_path_for(Path(report)), "reports")
        result["report"] = metrics
    log.info("sft_hargo: step %s, train loss %.4f; start point: %s; model in %s", result["global_step"],
             result["train_loss"], bars_line(metrics), result["final_dir"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--out", default="checkpoints/sft_hargo")
    ap.add_argument("--report", default="reports/sft_hargo.json")
    a = ap.parse_args(argv)
    sft_hargo(a.params, a.data, a.out, a.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
