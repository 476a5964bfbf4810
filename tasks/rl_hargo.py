"""Prefect task of the rl_hargo stage: one run of the HARGO comparison (``run_hargo``: a method and a seed).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: a run resumes from its last complete
checkpoint, EMA included, when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.training import hargo


@task(task_run_name="run_hargo-{method}-{seed}", cache_policy=NO_CACHE)
def run_hargo(params: Params, data_dir: Path, sft_dir: Path, output_dir: Path, report_to: list[str], method: str,
              seed: int) -> dict[str, Any]:
    return hargo.run_hargo(params, data_dir, sft_dir, output_dir, report_to, method, seed)
