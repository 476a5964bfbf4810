"""The tasks' one retry condition: infrastructure faults are retried, bad inputs and clean results are not; every
task that retries uses it.

Run: pytest tests/tasks/test_retries.py
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from prefect import Task
from prefect.states import Completed, Failed

from hpcrl_core.errors import BenchInfraError, DataError, HPCRLError, TrackingInfraError
from tasks.retries import retry_on

ROOT = Path(__file__).resolve().parents[2]


class _LockedError(TrackingInfraError):
    """A subclass of a retried fault is retried too."""


def test_only_the_named_faults_are_retried() -> None:
    retry = retry_on(TrackingInfraError, BenchInfraError)
    assert retry(None, None, Failed(data=TrackingInfraError("store locked")))
    assert retry(None, None, Failed(data=BenchInfraError("no compiler")))
    assert retry(None, None, Failed(data=_LockedError("locked")))
    assert not retry(None, None, Failed(data=DataError("no report")))
    assert not retry(None, None, Failed(data=HPCRLError("the base class is not a fault")))
    assert not retry(None, None, Completed(data=1))
    assert retry.__name__ == "retry_on_TrackingInfraError_BenchInfraError"


def test_a_condition_without_errors_is_refused() -> None:
    with pytest.raises(TypeError, match="at least one error type"):
        retry_on()


def _retrying_tasks() -> list[tuple[str, Task]]:  # type: ignore[type-arg]
    found = []
    for path in sorted((ROOT / "tasks").glob("*.py")):
        module = importlib.import_module(f"tasks.{path.stem}")
        found += [(f"{path.stem}.{name}", obj) for name, obj in vars(module).items()
                  if isinstance(obj, Task) and obj.retries]
    return found


def test_every_retrying_task_retries_through_retry_on() -> None:
    tasks = _retrying_tasks()
    assert {"pipeline", "prepare", "register"} <= {name.split(".")[0] for name, _ in tasks}
    for name, task in tasks:
        condition = task.retry_condition_fn
        assert condition is not None and condition.__name__.startswith("retry_on_"), (
            f"{name} retries without a condition from tasks.retries.retry_on: it would retry bad inputs too")
