"""Prefect task of the hpcgpt stage: one run of the HPC-GPT row (``run_hpcgpt``: a seed).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: a run resumes from its last complete
checkpoint when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.training import hpcgpt


@task(task_run_name="run_hpcgpt-{seed}", cache_policy=NO_CACHE)
def run_hpcgpt(params: Params, data_dir: Path, output_dir: Path, report_to: list[str], seed: int) -> dict[str, Any]:
    return hpcgpt.run_hpcgpt(params, data_dir, output_dir, report_to, seed)
