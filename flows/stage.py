"""What every DVC-stage flow does around its work: tag its MLflow run with the Prefect flow run.

Used by flows/prepare.py, sft.py, rl_dgemm.py, evaluate.py, register.py (training stages through
flows/resumable.py). Test: ``pytest tests/flows``.
"""

from __future__ import annotations

from prefect import runtime

# MLflow tag of every run of the HARGO comparison (training and evaluation): the UI filter tags.comparison = "hargo"
COMPARISON_TAG = {"comparison": "hargo"}


def flow_run_tags() -> dict[str, str]:
    """The tags that tie a stage's MLflow run to its Prefect flow run."""
    return {"prefect_flow_run_id": str(runtime.flow_run.id or "")}
