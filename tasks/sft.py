"""Prefect tasks of the sft stage: training (``run_sft``) and the post-SFT evaluation (``evaluate_policy``).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: a training run resumes from its last
checkpoint when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params, Settings
from hpcrl_core.evaluation import runner
from hpcrl_core.evaluation.report import samples_path_for, write_report
from hpcrl_core.training import sft
from tasks import agents_backend  # noqa: F401  registers the agents backend (HPCRL_BENCH_BACKEND=agents)


@task(cache_policy=NO_CACHE)
def run_sft(params: Params, data_dir: Path, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    return sft.run_sft(params, data_dir, output_dir, report_to)


@task(cache_policy=NO_CACHE)
def evaluate_policy(model_dir: Path, data_dir: Path, params: Params, report: Path) -> dict[str, Any]:
    """Evaluate the SFT policy on the held-out data; write ``report`` and its samples beside it."""
    logger = get_run_logger()
    result = runner.evaluate_policy(model_dir, data_dir, params, Settings(), progress=logger.info,
                             samples_path=samples_path_for(report))
    write_report(result, report)
    return result
