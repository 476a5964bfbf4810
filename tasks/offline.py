"""Prefect task of the offline stages (dpo, kto, simpo): one run of an offline baseline (``run_offline``).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: a run resumes from its last complete
checkpoint when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.training import offline


@task(task_run_name="run_offline-{method}-{seed}", cache_policy=NO_CACHE)
def run_offline(params: Params, pairs: Path, sft_dir: Path, output_dir: Path, report_to: list[str], method: str,
                seed: int) -> dict[str, Any]:
    return offline.run_offline(params, pairs, sft_dir, output_dir, report_to, method, seed)
