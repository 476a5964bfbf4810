"""The ``preferences`` stage: the SFT start answers every prompt RL asks ``preferences.samples`` times, the task
rewards score the answers, and the best and worst of each prompt become a pair (ties give none);
``preferences/pairs.jsonl`` and its card (pairs, ties and reward gaps per family), which the MLflow run
``preferences`` holds too.

Run: ``python -m flows.preferences [--params params.yaml] [--data data] [--sft checkpoints/sft_hargo/final]
[--out preferences]`` (what ``dvc repro preferences`` runs).  Test: ``pytest tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prefect import flow, get_run_logger

from flows.stage import COMPARISON_TAG, flow_run_tags
from hpcrl_core import tracking
from hpcrl_core.config import load_params
from hpcrl_core.training.preferences import CARD_FILE
from tasks.preferences import make_preferences


@flow(name="preferences")
def preferences(params_path: str = "params.yaml", data_dir: str = "data",
                sft_dir: str = "checkpoints/sft_hargo/final", out_dir: str = "preferences") -> dict:
    """Make the preference pairs; returns their card."""
    params = load_params(params_path)
    out = Path(out_dir)
    with tracking.dvc_stage_run("preferences", params={"preferences": params.preferences.model_dump()},
                                tags={**flow_run_tags(), **COMPARISON_TAG}):
        card = make_preferences(params, Path(data_dir), Path(sft_dir), out)
        tracking.log_metrics({f"{family}.{key}": value for family, block in
                              [*card["families"].items(), ("all", card["total"])]
                              for key, value in block.items() if isinstance(value, int | float)})
        tracking.log_artifact(out / CARD_FILE, "preferences")
    total = card["total"]
    get_run_logger().info("preferences: %s pairs from %s prompts (%s ties) in %s", total["pairs"], total["prompts"],
                          total["ties"], out)
    return card


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--data", default="data")
    ap.add_argument("--sft", default="checkpoints/sft_hargo/final")
    ap.add_argument("--out", default="preferences")
    a = ap.parse_args(argv)
    preferences(a.params, a.data, a.sft, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
