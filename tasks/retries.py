"""The one Prefect retry condition of the tasks: retry a task only when it failed with an infrastructure fault.

Failures split three ways (ARCHITECTURE.md): a model's mistake is a reward, "not applicable" is ``None``, and an
infrastructure fault raises a typed error (``BenchInfraError``, ``TrackingInfraError``, a DVC lock held by another
process). Only the last is worth running again; a bad input or a stage that fails on its own fails the same way
again, so retrying it would only burn time. ``retry_on`` turns the errors a task may retry into Prefect's
``retry_condition_fn``.

Test: ``pytest tests/tasks/test_retries.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RetryCondition = Callable[[Any, Any, Any], bool]


def retry_on(*errors: type[BaseException]) -> RetryCondition:
    """A ``retry_condition_fn`` that retries a failed task when its exception is one of ``errors`` (or a subclass).

    Args:
        errors: the infrastructure faults the task may retry, e.g. ``TrackingInfraError``.

    Returns:
        ``condition(task, task_run, state) -> bool``: True for a failed state whose exception is one of ``errors``;
        False for any other exception and for a state that did not fail.
    """
    if not errors:
        raise TypeError("retry_on() needs at least one error type: the faults running again can fix")

    def condition(task: Any, task_run: Any, state: Any) -> bool:
        try:
            state.result()
        except errors:
            return True
        except Exception:
            return False
        return False

    condition.__name__ = condition.__qualname__ = "retry_on_" + "_".join(e.__name__ for e in errors)
    return condition
