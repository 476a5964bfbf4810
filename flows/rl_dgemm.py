"""The ``rl_dgemm`` stage: GRPO from the SFT policy on DGEMM problems, rewards measured by the benchmark engine,
prompts staged by SQD; checkpoints (with curriculum and archive) to ``checkpoints/rl_dgemm``, resumed after a
crash when the inputs are unchanged; per-step reward components, the curriculum and the archive to MLflow.

Run: ``python -m flows.rl_dgemm [--params params.yaml] [--data data] [--sft checkpoints/sft/final]
[--out checkpoints/rl_dgemm]`` (what ``dvc repro rl_dgemm`` runs).
Test: ``pytest tests/flows/test_rl_kill_resume.py``.
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
from tasks.rl_dgemm import run_rl

SUMMARY_KEYS = ("global_step", "train_loss", "promotions")


@flow(name="rl-dgemm")
def rl_dgemm(params_path: str = "params.yaml", data_dir: str = "data", sft_dir: str = "checkpoints/sft/final",
             out_dir: str = "checkpoints/rl_dgemm") -> dict:
    """Train (or resume) the GRPO policy; returns steps, loss, the final folder and curriculum/archive figures."""
    params = load_params(params_path)
    data, sft, out = Path(data_dir), Path(sft_dir), Path(out_dir)
    inputs = [data / "dgemm" / "problems_train.jsonl", *sorted(p for p in sft.glob("*") if p.is_file())]
    settings = {"rl_dgemm": params.rl_dgemm.model_dump(), "reward": params.reward.model_dump(),
                "bench": params.bench.model_dump()}
    log = get_run_logger()
    # its method: the GRPO loss variant (dapo, grpo, dr_grpo, ...), as the HARGO runs name theirs
    with resumable_dvc_stage("rl_dgemm", out, inputs, settings, DGEMM_COMPARISON_TAG, method=params.rl_dgemm.loss_type,
                             data=inputs[:1]):
        result = run_rl(params, data, sft, out, report_to=["mlflow"])
        tracking.log_metrics({k: v for k, v in result.items() if isinstance(v, int | float)})
        final = Path(result["final_dir"])
        for name in ("qd_archive.json", "sqd_state.json", "qd_archive.png", "log_history.json"):
            tracking.log_artifact(final / name, "rl_dgemm")
    log.info("rl_dgemm: step %s, train loss %.4f, %s promotions, resumed from %s; model in %s",
             result["global_step"], result["train_loss"], result["promotions"], result["resumed_from"],
             result["final_dir"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--sft", default="checkpoints/sft/final")
    ap.add_argument("--out", default="checkpoints/rl_dgemm")
    a = ap.parse_args(argv)
    rl_dgemm(a.params, a.data, a.sft, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
