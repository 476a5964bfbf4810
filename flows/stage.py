"""What every DVC-stage flow does around its work: tag its MLflow run with the Prefect flow run.

Used by flows/prepare.py, sft.py, rl_dgemm.py, evaluate.py, register.py (training stages through
flows/resumable.py); the HARGO comparison's runs (rl_hargo, offline) log their results with
``log_comparison_run``. Test: ``pytest tests/flows``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from prefect import runtime

from hpcrl_core import tracking

# MLflow tag of every run of the HARGO comparison (training and evaluation): the UI filter tags.comparison = "hargo"
COMPARISON_TAG = {"comparison": "hargo"}
# and of the two DGEMM policies' training runs (sft, rl_dgemm): SFT vs RL is the filter tags.comparison = "dgemm"
DGEMM_COMPARISON_TAG = {"comparison": "dgemm"}


def flow_run_tags() -> dict[str, str]:
    """The tags that tie a stage's MLflow run to its Prefect flow run."""
    return {"prefect_flow_run_id": str(runtime.flow_run.id or "")}


def log_comparison_run(result: Mapping[str, Any], artifact_dir: str) -> None:
    """Log one run of the HARGO comparison to its open MLflow run: every number of ``result`` but the seed (bools
    left out) as a metric, and the final folder's ``log_history.json`` under ``artifact_dir``."""
    tracking.log_metrics({k: float(v) for k, v in result.items()
                          if isinstance(v, int | float) and not isinstance(v, bool) and k != "seed"})
    tracking.log_artifact(Path(result["final_dir"]) / "log_history.json", artifact_dir)
