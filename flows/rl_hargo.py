"""The ``rl_hargo`` stage: one run of the HARGO comparison, a method (grpo, dr_grpo, hargo, hargo_b1, hargo_b2,
ppo) and a seed, from the HARGO SFT start with the task rewards; checkpoints (with the EMA baseline, or PPO's value
head) to ``checkpoints/rl_hargo/<method>-<seed>``, resumed after a crash when the inputs are unchanged; per-step
rewards, KL, weights and the EMA to an MLflow run named ``rl_hargo@<method>-<seed>`` and tagged ``comparison=hargo``,
``method``, ``seed`` (the MLflow UI compares all runs with the filter ``tags.comparison = "hargo"``).

DVC runs it once per (method, seed) of ``rl_hargo.methods`` x ``rl_hargo.seeds`` (a ``matrix`` stage).

Run: ``python -m flows.rl_hargo --method hargo --seed 1 [--params params.yaml] [--data data]
[--sft checkpoints/sft_hargo/final] [--out checkpoints/rl_hargo/hargo-1]`` (what ``dvc repro rl_hargo@hargo-1`` runs).
Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.resumable import resumable_dvc_stage
from flows.stage import COMPARISON_TAG, log_comparison_run
from hpcrl_core.config import load_params
from hpcrl_core.training.hargo import prompt_files
from tasks.rl_hargo import run_hargo


def run_name(method: str, seed: int) -> str:
    """The DVC stage (and MLflow run) name of one run: ``rl_hargo@<method>-<seed>``."""
    return f"rl_hargo@{method}-{seed}"


@flow(name="rl-hargo")
def rl_hargo(method: str = "hargo", seed: int = 1, params_path: str = "params.yaml", data_dir: str = "data",
             sft_dir: str = "checkpoints/sft_hargo/final", out_dir: str | None = None) -> dict:
    """Train (or resume) one run of the comparison; returns steps, loss, the final folder and the EMA."""
    params = load_params(params_path)
    rp = params.rl_hargo
    data, sft = Path(data_dir), Path(sft_dir)
    out = Path(out_dir) if out_dir else Path("checkpoints/rl_hargo") / f"{method}-{seed}"
    inputs = prompt_files(rp, data) + sorted(p for p in sft.glob("*") if p.is_file())
    # the list of runs and another method's knobs (PPO's for an estimator) never restart this run
    skip = {"methods", "seeds"} | ({"ppo"} if method != "ppo" else set())
    settings = {"rl_hargo": rp.model_dump(exclude=skip), "task_reward": params.task_reward.model_dump(),
                "method": method, "seed": seed}
    log = get_run_logger()
    name = run_name(method, seed)
    with resumable_dvc_stage(name, out, inputs, settings, {**COMPARISON_TAG, "method": method, "seed": str(seed)},
                             method=method, data=prompt_files(rp, data)):
        result = run_hargo(params, data, sft, out, ["mlflow"], method, seed)
        log_comparison_run(result, "rl_hargo")
    log.info("%s: step %s, train loss %.4f, EMA %s, resumed from %s; model in %s", name, result["global_step"],
             result["train_loss"], result["ema"], result["resumed_from"], result["final_dir"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="hargo")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--sft", default="checkpoints/sft_hargo/final")
    ap.add_argument("--out", default=None, help="default: checkpoints/rl_hargo/<method>-<seed>")
    a = ap.parse_args(argv)
    rl_hargo(a.method, a.seed, a.params, a.data, a.sft, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
