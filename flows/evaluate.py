"""The ``evaluate_dgemm`` stage: SFT and RL policies on the held-out DGEMM problems, benchmarked on this CPU;
``reports/eval_dgemm.json`` (DVC metrics: blocks ``sft`` and ``rl``, ``rl.winrate_vs_sft``, the oracle yardstick
``rl.oracle_ratio`` ... and the per-problem ``oracle.table``: ``hpcrl_core/evaluation/oracle.py``), the per-kernel
samples, and plots (GFLOPS distributions, RL curves over steps) in ``reports/`` and MLflow.

Run: ``python -m flows.evaluate [--params params.yaml] [--data data] [--sft checkpoints/sft/final]
[--rl checkpoints/rl_dgemm/final] [--report reports/eval_dgemm.json]`` (what ``dvc repro evaluate_dgemm`` runs).
Test: the flow has no test of its own; what it runs is tested by ``pytest tests/evaluation/test_dgemm.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

import tasks.evaluate  # its task evaluate_dgemm shares this flow's name
from flows.stage import flow_run_tags
from hpcrl_core import tracking
from hpcrl_core.config import load_params
from hpcrl_core.evaluation.report import oracle_line

BLOCK_KEYS = ("verified_rate", "respect_rate", "gflops_median", "gflops_best", "best_vs_numpy", "winrate_vs_sft",
              "oracle_ratio", "oracle_ratio_rich", "oracle_ratio_held_out", "oracle_ratio_drawn", "headroom_closed",
              "headroom_closed_measurable", "headroom_closed_weighted", "distinct_kernels")
ORACLE_KEYS = ("problems_with_oracle", "problems_without_oracle", "corpus_verified", "held_out_problems",
               "distinct_kernels")


@flow(name="evaluate-dgemm")
def evaluate_dgemm(params_path: str = "params.yaml", data_dir: str = "data", sft_dir: str = "checkpoints/sft/final",
             rl_dir: str = "checkpoints/rl_dgemm/final", report: str = "reports/eval_dgemm.json") -> dict:
    """Evaluate SFT and RL on the held-out problems; returns the report."""
    params = load_params(params_path)
    out = Path(report)
    models = {"sft": Path(sft_dir), "rl": Path(rl_dir)}
    log = get_run_logger()
    tags = flow_run_tags()
    with tracking.dvc_stage_run("evaluate_dgemm", params={"evaluate": params.evaluate.model_dump()}, tags=tags):
        result = tasks.evaluate.evaluate_dgemm(models, Path(data_dir), params, out)
        steps_png = out.with_name("rl_dgemm_steps.png")
        plotted = tasks.evaluate.plot_training_curves(Path(rl_dir) / "log_history.json", steps_png)
        tracking.log_metrics({f"{name}.{k}": float(v) for name in models for k, v in result[name].items()
                              if k in BLOCK_KEYS and v is not None})
        tracking.log_metrics({f"oracle.{k}": float(v) for k, v in result["oracle"].items() if k in ORACLE_KEYS})
        tracking.log_dict(result, "reports/eval_dgemm.json")
        for png in [out.with_name(out.stem + "_gflops.png"), *([steps_png] if plotted else [])]:
            tracking.log_artifact(png, "reports")
    for name in models:
        block = result[name]
        log.info("%s: verified %.0f%%, median %.2f GFLOPS, best %.2f (%.2f of numpy), oracle ratio %s (4-5 "
                 "techniques %s), %d distinct kernels%s%s", name, 100 * block["verified_rate"], block["gflops_median"],
                 block["gflops_best"], block["best_vs_numpy"], _opt(block["oracle_ratio"]),
                 _opt(block["oracle_ratio_rich"]), block["distinct_kernels"],
                 f", WinRate vs SFT {block['winrate_vs_sft']:.2f}" if "winrate_vs_sft" in block else "",
                 f", headroom closed {_opt(block['headroom_closed'])}" if "headroom_closed" in block else "")
    log.info("%s", oracle_line(result))
    return result


def _opt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--sft", default="checkpoints/sft/final")
    ap.add_argument("--rl", default="checkpoints/rl_dgemm/final")
    ap.add_argument("--report", default="reports/eval_dgemm.json")
    a = ap.parse_args(argv)
    evaluate_dgemm(a.params, a.data, a.sft, a.rl, a.report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
