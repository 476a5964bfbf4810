"""The ``sft`` stage: train the policy on every family's prepared data with TRL's SFTTrainer; checkpoints to
``checkpoints/sft`` (resumed after a crash when the inputs are unchanged); then evaluate it on the held-out data
into ``reports/sft.json``; training curves, the result and the report to MLflow.

Run: ``python -m flows.sft [--params params.yaml] [--data data] [--out checkpoints/sft]`` (what
``dvc repro sft`` runs).  Test: ``pytest tests/flows/test_sft_flow.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.resumable import resumable_dvc_stage
from flows.stage import DGEMM_COMPARISON_TAG
from hpcrl_core import tracking
from hpcrl_core.config import load_params
from hpcrl_core.evaluation.report import samples_path_for
from tasks.sft import evaluate_policy, run_sft


# log_prints stays off: libraries print during training (datasets even prints bytecode while fingerprinting), and
# those lines would flood the flow-run log; the flow reports through its logger.
@flow(name="sft")
def sft(params_path: str = "params.yaml", data_dir: str = "data", out_dir: str = "checkpoints/sft",
        report: str = "reports/sft.json") -> dict:
    """Train (or resume) the SFT policy and evaluate it; returns losses, steps, the final folder and the report."""
    params = load_params(params_path)
    data, out = Path(data_dir), Path(out_dir)
    files = [data / f / name for f in params.sft.families for name in ("train.jsonl", "eval.jsonl")]
    settings = {"sft": params.sft.model_dump(), "model": params.model.model_dump()}
    log = get_run_logger()
    with resumable_dvc_stage("sft", out, files, settings, DGEMM_COMPARISON_TAG, method="sft", data=files):
        result = run_sft(params, data, out, report_to=["mlflow"])
        tracking.log_metrics({k: v for k, v in result.items() if k in ("train_loss", "eval_loss", "global_step")})
        metrics = evaluate_policy(Path(result["final_dir"]), data, params, Path(report))
        tracking.log_metrics({f"eval.{k}": v for k, v in metrics.items() if k != "meta" and v is not None})
        tracking.log_dict(metrics, "reports/sft.json")
        tracking.log_artifact(samples_path_for(Path(report)), "reports")
        result["report"] = metrics
        if result["notes"]:
            tracking.log_dict(result["notes"], "sft_data_notes.json")
    log.info("sft: step %s, train loss %.4f, eval loss %s, resumed from %s; model in %s", result["global_step"],
             result["train_loss"], result.get("eval_loss"), result.get("resumed_from"), result["final_dir"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--out", default="checkpoints/sft")
    ap.add_argument("--report", default="reports/sft.json")
    a = ap.parse_args(argv)
    sft(a.params, a.data, a.out, a.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
