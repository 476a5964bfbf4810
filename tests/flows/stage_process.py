"""Running a stage's real command (``python -m flows.<stage>``) as a killable process group, for the kill/resume
tests: start it with its own MLflow store and Prefect home, wait for a file it writes, find its newest complete
checkpoint, read the stage's runs from the store.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def start_stage(module: str, args: list[str], tmp_path: Path, env: dict[str, str] | None = None
                ) -> subprocess.Popen[str]:
    """``python -m module *args`` from the repository root in a new session (so ``os.killpg`` reaches everything it
    starts), with MLflow and Prefect state under ``tmp_path`` plus ``env``; stdout and stderr merged."""
    full_env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db",
                "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


def wait_for(path: Path, proc: subprocess.Popen[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert proc.poll() is None, f"the stage ended (rc {proc.returncode}) before {path.name} was written"
        assert time.monotonic() < deadline, f"{path.name} did not appear within {timeout_s:.0f} s"
        time.sleep(0.2)


def newest_complete_step(out: Path) -> int:
    """The step of the newest checkpoint under ``out`` that has its ``trainer_state.json`` (written last)."""
    return max(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/trainer_state.json"))


def stage_runs(tmp_path: Path, dvc_stage: str) -> list[Any]:
    """Every MLflow run of ``dvc_stage`` in the store ``start_stage`` gave the stage."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return list(client.search_runs(experiments, filter_string=f"tags.`hpcrl.stage` = '{dvc_stage}'"))


def logged_steps(tmp_path: Path, run: Any, metric: str) -> list[int]:
    """The distinct steps at which ``run`` logged ``metric``, sorted (a step redone after a resume counts once)."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    return sorted({m.step for m in client.get_metric_history(run.info.run_id, metric)})
