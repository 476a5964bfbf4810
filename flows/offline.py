"""The ``offline`` stage: one run of an offline baseline of the HARGO comparison, a method (dpo, kto, simpo) and a
seed, from the HARGO SFT start on ``preferences/pairs.jsonl``; checkpoints to ``checkpoints/offline/<method>-<seed>``,
resumed after a crash when the inputs are unchanged; per-step losses to an MLflow run named
``offline@<method>-<seed>`` and tagged ``comparison=hargo``, ``method``, ``seed`` like the online runs.

DVC runs it once per (method, seed) of ``offline.methods`` x ``offline.seeds`` (a ``matrix`` stage).

Run: ``python -m flows.offline --method dpo --seed 1 [--params params.yaml] [--pairs preferences/pairs.jsonl]
[--sft checkpoints/sft_hargo/final] [--out checkpoints/offline/dpo-1]`` (what ``dvc repro offline@dpo-1`` runs).
Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.resumable import resumable_dvc_stage
from flows.stage import COMPARISON_TAG, log_comparison_run
from hpcrl_core.config import OFFLINE_METHODS, load_params
from tasks.offline import run_offline


@flow(name="offline")
def offline(method: str = "dpo", seed: int = 1, params_path: str = "params.yaml",
            pairs: str = "preferences/pairs.jsonl", sft_dir: str = "checkpoints/sft_hargo/final",
            out_dir: str | None = None) -> dict:
    """Train (or resume) one offline run; returns steps, loss, the final folder and the pair count."""
    params = load_params(params_path)
    params.offline.method(method)  # an unknown method stops here, before anything is cleared
    sft = Path(sft_dir)
    out = Path(out_dir) if out_dir else Path("checkpoints/offline") / f"{method}-{seed}"
    inputs = [Path(pairs)] + sorted(p for p in sft.glob("*") if p.is_file())
    others = {m for m in OFFLINE_METHODS if m != method}  # another method's knobs never restart this run
    settings = {"offline": params.offline.model_dump(exclude={"methods", "seeds", *others}), "method": method,
                "seed": seed}
    name = f"offline@{method}-{seed}"
    with resumable_dvc_stage(name, out, inputs, settings, {**COMPARISON_TAG, "method": method, "seed": str(seed)},
                             method=method, data=inputs[:1]):
        result = run_offline(params, Path(pairs), sft, out, ["mlflow"], method, seed)
        log_comparison_run(result, method)
    get_run_logger().info("%s: step %s, train loss %.4f on %s pairs, resumed from %s; model in %s", name,
                          result["global_step"], result["train_loss"], result["pairs"], result["resumed_from"],
                          result["final_dir"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--method", default="dpo")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--pairs", default="preferences/pairs.jsonl")
    ap.add_argument("--sft", default="checkpoints/sft_hargo/final")
    ap.add_argument("--out", default=None, help="default: checkpoints/offline/<method>-<seed>")
    a = ap.parse_args(argv)
    offline(a.method, a.seed, a.params, a.pairs, a.sft, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
