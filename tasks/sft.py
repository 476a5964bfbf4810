"""Prefect task of the sft stage: one call of ``hpcrl_core.training.sft.run_sft``.

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: a training run resumes from its last
checkpoint when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.training.sft import run_sft


@task(name="train-sft", cache_policy=NO_CACHE)
def train_sft(params: Params, data_dir: Path, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    return run_sft(params, data_dir, output_dir, report_to)
