"""Prefect tasks of the register flow: each wraps the ``hpcrl_core`` function it is named after.

No Prefect caching (DVC owns skip-if-unchanged). Tasks that talk to the tracking store retry a
``TrackingInfraError`` (store unreachable, locked, timed out); a missing or malformed report or model folder
(``DataError``, ``ConfigError``) is never retried: running again cannot fix it. Retrying ``register_model_version``
after a failure whose response was lost may leave an extra version or a failed run: harmless, since only the
flow's aliases mark the versions that matter.

Test: ``pytest tests/flows/test_register_flow.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core import registry
from hpcrl_core.config import RegistryParams
from hpcrl_core.errors import TrackingInfraError
from hpcrl_core.evaluation import promotion
from hpcrl_core.registry import ModelVersionInfo
from tasks.retries import retry_on

_STORE = {"retries": 2, "retry_delay_seconds": 10, "retry_condition_fn": retry_on(TrackingInfraError),
          "cache_policy": NO_CACHE}


@task(cache_policy=NO_CACHE)
def read_eval_report(path: Path, policy: RegistryParams) -> dict[str, Any]:
    return promotion.read_eval_report(path, policy)


@task(**_STORE)
def find_version(name: str, tag: str, value: str) -> ModelVersionInfo | None:
    return registry.find_version(name, tag, value)


@task(**_STORE)
def register_model_version(model_dir: Path, metrics: dict[str, float], report: dict[str, Any], name: str,
                           tags: dict[str, str]) -> ModelVersionInfo:
    return registry.register_model_version(model_dir, metrics, report, name, tags)


@task(**_STORE)
def get_alias(name: str, alias: str) -> ModelVersionInfo | None:
    return registry.get_alias(name, alias)


@task(**_STORE)
def set_alias(name: str, alias: str, version: int) -> None:
    registry.set_alias(name, alias, version)


@task(**_STORE)
def get_version(name: str, version: int) -> ModelVersionInfo:
    return registry.get_version(name, version)
