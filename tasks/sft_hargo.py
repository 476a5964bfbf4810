"""Prefect tasks of the sft_hargo stage: the start point's training (``run_sft_hargo``) and its held-out report
(``evaluate_start_point``, written with its per-item samples).

No Prefect caching (DVC owns skip-if-unchanged) and no automatic retries: training resumes from its last checkpoint
when the stage is run again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params
from hpcrl_core.evaluation import start_point
from hpcrl_core.evaluation.report import samples_path_for, write_report, write_samples
from hpcrl_core.training import start_point as training_start


@task(cache_policy=NO_CACHE)
def run_sft_hargo(params: Params, data_dir: Path, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    return training_start.run_sft_hargo(params, data_dir, output_dir, report_to)


@task(cache_policy=NO_CACHE)
def evaluate_start_point(model_dir: Path, data_dir: Path, params: Params, report: Path) -> dict[str, Any]:
    """Score the start point on the held-out items; write ``report`` and its per-item samples beside it."""
    result, rows = start_point.evaluate_start_point(model_dir, data_dir, params, progress=get_run_logger().info)
    write_report(result, report)
    write_samples(rows, samples_path_for(report))
    return result
