"""Prefect tasks of the register stage: each wraps one ``hpcrl_core.tracking`` function.

No Prefect caching (DVC owns skip-if-unchanged). Tasks that talk to the tracking store retry a
``TrackingInfraError`` (store unreachable, locked, timed out); a missing or malformed report or model folder
(``DataError``, ``ConfigError``) is never retried: running again cannot fix it. Retrying ``register-version``
after a failure whose response was lost may leave an extra version or a failed run: harmless, since only the
flow's aliases mark the versions that matter.

Test: ``pytest tests/flows/test_register_flow.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core import tracking
from hpcrl_core.tracking import ModelVersionInfo, Promotion, TrackingInfraError
from tasks.retries import retry_on


@task(name="read-eval-report", cache_policy=NO_CACHE)
def read_report(path: Path) -> dict[str, Any]:
    return tracking.read_eval_report(path)


@task(name="register-version", retries=2, retry_delay_seconds=10, retry_condition_fn=retry_on(TrackingInfraError),
      cache_policy=NO_CACHE)
def register_version(model_dir: Path, report: dict[str, Any], data_hash: str, name: str,
                     tags: dict[str, str]) -> ModelVersionInfo:
    return tracking.register_model_version(model_dir, report, data_hash, name, tags)


@task(name="set-alias", retries=2, retry_delay_seconds=10, retry_condition_fn=retry_on(TrackingInfraError),
      cache_policy=NO_CACHE)
def set_alias(name: str, alias: str, version: int) -> None:
    tracking.set_alias(name, alias, version)


@task(name="promote-if-better", retries=2, retry_delay_seconds=10, retry_condition_fn=retry_on(TrackingInfraError),
      cache_policy=NO_CACHE)
def promote(challenger: ModelVersionInfo) -> Promotion:
    return tracking.promote_if_better(challenger)


@task(name="get-version", retries=2, retry_delay_seconds=10, retry_condition_fn=retry_on(TrackingInfraError),
      cache_policy=NO_CACHE)
def get_version(name: str, version: int) -> ModelVersionInfo:
    return tracking.get_version(name, version)
