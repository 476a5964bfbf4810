"""Prefect tasks of the prepare stage: one per family builder and one for writing.

No Prefect caching: DVC owns skip-if-unchanged (ARCHITECTURE.md).

Each wraps the ``hpcrl_core`` function it is named after; infrastructure faults (``BenchInfraError``) are retried,
data errors (``DataError``, ``ConfigError``) are not: retrying a malformed file cannot help.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import BenchParams, PrepareParams, Settings
from hpcrl_core.data import families, prepare
from hpcrl_core.data.prepare import FamilyOutput
from hpcrl_core.errors import BenchInfraError
from tasks.retries import retry_on


def _log(text: str) -> None:
    get_run_logger().info(text)


@task(retries=1, retry_condition_fn=retry_on(BenchInfraError), cache_policy=NO_CACHE)
def prepare_dgemm(p: PrepareParams, bench: BenchParams, settings: Settings) -> FamilyOutput:
    return families.prepare_dgemm(p, bench, settings, progress=_log)


@task(cache_policy=NO_CACHE)
def prepare_race(language: str, p: PrepareParams) -> FamilyOutput:
    return families.prepare_race(language, p, progress=_log)


@task(cache_policy=NO_CACHE)
def prepare_qa(family: str, p: PrepareParams) -> FamilyOutput:
    return families.prepare_qa(family, p, progress=_log)


@task(cache_policy=NO_CACHE)
def write_outputs(outputs: list[FamilyOutput], out_dir: Path) -> dict[str, Any]:
    return prepare.write_outputs(outputs, out_dir)
