"""The ``register`` stage: register the RL model in MLflow; make it champion only if it beats the champion.

The model folder becomes a new version of ``hpcrl-dgemm`` with alias ``challenger``, its held-out metrics, data
hash and git commit; alias ``champion`` moves to it only if it beats the current champion on the held-out suite
(``hpcrl_core.tracking.beats``).

The data hash is ``hpcrl_core.tracking.data_hash``: sha256 over the sorted ``<data>/dgemm/*.jsonl`` files (not
DVC's hash from ``dvc.lock``). Inputs are checked before anything is registered.

Run: ``python -m flows.register [--model checkpoints/rl_dgemm/final] [--report reports/eval_dgemm.json]
[--data data] [--name hpcrl-dgemm]``.  Test: ``pytest tests/flows/test_register_flow.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, runtime

from hpcrl_core import tracking
from tasks.register import get_version, promote, read_report, register_version, set_alias


@flow(name="register")
def register(model_dir: str = "checkpoints/rl_dgemm/final", report: str = "reports/eval_dgemm.json",
             data_dir: str = "data", name: str = tracking.MODEL_NAME) -> dict[str, Any]:
    """Register ``model_dir`` with the metrics of ``report``; returns name, version, aliases, promoted and the
    champion's version."""
    evaluation = read_report(Path(report))
    tracking.check_model_dir(Path(model_dir))
    data_hash = tracking.data_hash(Path(data_dir))
    same = tracking.find_version(name, "model_hash", tracking.model_hash(Path(model_dir)))
    if same is not None:  # a rerun of the pipeline with an unchanged model must not add a version
        get_run_logger().info("register: %s is already %s v%d [%s]; nothing registered", model_dir, name,
                              same.version, ", ".join(same.aliases))
        champion = tracking.get_alias(name, tracking.CHAMPION)
        return {"name": name, "version": same.version, "aliases": list(same.aliases), "promoted": False,
                "champion_version": champion.version if champion else None, "already_registered": True}
    tags = {"prefect_flow_run_id": str(runtime.flow_run.id or "")}
    new = register_version(Path(model_dir), evaluation, data_hash, name, tags)
    set_alias(name, tracking.CHALLENGER, new.version)
    promotion = promote(new)
    final = get_version(name, new.version)
    get_run_logger().info("register: %s v%d [%s] %s %.3f, %s %.3f; %s", name, final.version,
                          ", ".join(final.aliases), tracking.GFLOPS_KEY, new.metrics[tracking.GFLOPS_KEY],
                          tracking.VERIFIED_KEY, new.metrics[tracking.VERIFIED_KEY], _outcome(promotion))
    return {"name": name, "version": final.version, "aliases": list(final.aliases), "promoted": promotion.promoted,
            "champion_version": promotion.champion_version, "already_registered": False}


def _outcome(promotion: tracking.Promotion) -> str:
    if not promotion.promoted:
        return f"champion stays v{promotion.champion_version}"
    if promotion.previous_champion is None:
        return "first champion"
    return f"new champion, replacing v{promotion.previous_champion}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="checkpoints/rl_dgemm/final", help="saved HF model or LoRA adapter folder")
    ap.add_argument("--report", default="reports/eval_dgemm.json", help="evaluation report with an 'rl' block")
    ap.add_argument("--data", default="data", help="prepared data folder; its dgemm/*.jsonl are hashed")
    ap.add_argument("--name", default=tracking.MODEL_NAME, help="registered model name")
    a = ap.parse_args(argv)
    register(a.model, a.report, a.data, a.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
