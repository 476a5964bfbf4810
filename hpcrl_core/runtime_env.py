"""Environment defaults for the orchestration layers, applied before Prefect, MLflow or DVC are imported:
a project-local Prefect home, no telemetry, and an ephemeral-server start-up timeout that a loaded 2-core
machine meets. Values already set in the environment win.

Test: ``pytest tests/test_layers.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def apply_defaults() -> None:
    for key, value in {
        "PREFECT_HOME": str(ROOT / ".prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "DO_NOT_TRACK": "true",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DVC_NO_ANALYTICS": "1",
    }.items():
        os.environ.setdefault(key, value)
