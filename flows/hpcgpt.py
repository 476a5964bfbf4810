"""The ``hpcgpt`` stage: one run of the HPC-GPT row of the HARGO comparison (a second supervised baseline, our reading
of the HPC-GPT recipe: ``hpcrl_core/training/hpcgpt.py``), for one seed; checkpoints to
``checkpoints/hpcgpt/hpcgpt-<seed>``, resumed after a crash when the inputs are unchanged; losses to an MLflow run
named ``hpcgpt@<seed>`` and tagged ``comparison=hargo``, ``method=hpcgpt``, ``seed`` like the other runs.

DVC runs it once per seed of ``hpcgpt.seeds`` (a ``matrix`` stage).

Run: ``python -m flows.hpcgpt --seed 1 [--params params.yaml] [--data data] [--out checkpoints/hpcgpt/hpcgpt-1]``
(what ``dvc repro hpcgpt@1`` runs).
Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.resumable import resumable_dvc_stage
from flows.stage import COMPARISON_TAG, log_comparison_run
from hpcrl_core.config import HPCGPT, load_params
from hpcrl_core.training.hpcgpt import train_files
from tasks.hpcgpt import run_hpcgpt


@flow(name="hpcgpt")
def hpcgpt(seed: int = 1, params_path: str = "params.yaml", data_dir: str = "data",
           out_dir: str | None = None) -> dict:
    """Train (or resume) one HPC-GPT run; returns losses, steps, the final folder and the record count."""
    params = load_params(params_path)
    data = Path(data_dir)
    out = Path(out_dir) if out_dir else Path("checkpoints/hpcgpt") / f"{HPCGPT}-{seed}"
    inputs = [*train_files(params, data), *(data / f / "eval.jsonl" for f in params.hpcgpt.families)]
    settings = {"hpcgpt": params.hpcgpt.model_dump(exclude={"seeds"}), "sft_hargo": params.sft_hargo.model_dump(),
                "model": params.model.model_dump(), "seed": seed}
    name = f"{HPCGPT}@{seed}"
    with resumable_dvc_stage(name, out, inputs, settings, {**COMPARISON_TAG, "method": HPCGPT, "seed": str(seed)},
                             method=HPCGPT, data=inputs):
        result = run_hpcgpt(params, data, out, ["mlflow"], seed)
        log_comparison_run(result, HPCGPT)
    get_run_logger().info("%s: %s epochs of %s records in %s steps, train loss %.4f, resumed from %s; model in %s",
                          name, result["epochs"], result["records"], result["global_step"], result["train_loss"],
                          result["resumed_from"], result["final_dir"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--out", default=None, help="default: checkpoints/hpcgpt/hpcgpt-<seed>")
    a = ap.parse_args(argv)
    hpcgpt(a.seed, a.params, a.data, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
