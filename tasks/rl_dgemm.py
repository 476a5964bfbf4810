"""Prefect task of the rl_dgemm stage: online GRPO with benchmark rewards and SQD (``run_rl``).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: a run resumes from its last complete
checkpoint, curriculum and archive included, when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.training import rl
from tasks import agents_backend  # noqa: F401  registers the agents backend (HPCRL_BENCH_BACKEND=agents)


@task(cache_policy=NO_CACHE)
def run_rl(params: Params, data_dir: Path, sft_dir: Path, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    return rl.run_rl(params, data_dir, sft_dir, output_dir, report_to)
