"""The only module that talks to MLflow.

Embedded default: a local SQLite store (``sqlite:///mlflow.db``) with artifacts in ``./mlruns``; a server is
chosen by ``MLFLOW_TRACKING_URI``. Every stage run is tagged with the git commit, and with the DVC data hash and
the Prefect flow-run id when the caller knows them (this module never imports Prefect).

Test: ``pytest tests/test_tracking.py``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

EXPERIMENT = "hpcrl"
DEFAULT_URI = "sqlite:///mlflow.db"


def _quiet_env() -> None:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")


def git_commit(root: Path | None = None) -> str:
    """The current commit (with ``-dirty`` when the tree has changes), or ``unknown`` outside git."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    if sha.returncode != 0:
        return "unknown"
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


@contextlib.contextmanager
def stage_run(stage: str, params: Mapping[str, Any] | None = None, tags: Mapping[str, str] | None = None,
              tracking_uri: str | None = None) -> Iterator[Any]:
    """An MLflow run for one stage: params flattened (``prepare.race.per_pattern``), standard tags set.

    Yields the active ``mlflow.ActiveRun``.
    """
    _quiet_env()
    import mlflow

    mlflow.set_tracking_uri(tracking_uri or os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_URI))
    mlflow.set_experiment(EXPERIMENT)
    all_tags = {"hpcrl.stage": stage, "git_commit": git_commit(), **(tags or {})}
    with mlflow.start_run(run_name=stage, tags=all_tags) as run:
        if params:
            flat = {k: (str(v)[:500] if not isinstance(v, int | float | bool) else v)
                    for k, v in _flatten(params).items()}
            mlflow.log_params(flat)
        yield run


def log_metrics(metrics: Mapping[str, float], step: int | None = None) -> None:
    """Log numeric metrics (non-numbers are skipped); names may contain dots and slashes."""
    import mlflow

    numeric = {k: float(v) for k, v in _flatten(metrics).items() if isinstance(v, int | float) and
               not isinstance(v, bool)}
    if numeric:
        mlflow.log_metrics(numeric, step=step)


def log_dict(obj: Any, artifact_file: str) -> None:
    import mlflow

    mlflow.log_dict(obj, artifact_file)


def log_artifact(path: Path, artifact_path: str | None = None) -> None:
    import mlflow

    mlflow.log_artifact(str(path), artifact_path)
