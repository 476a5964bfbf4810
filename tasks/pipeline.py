"""Prefect task of the pipelines: one DVC stage through ``hpcrl_core.dvc_repro.run_dvc_stage``, its output in the
run log line by line.

No Prefect caching: DVC owns skip-if-unchanged. Only ``DvcStageLockedError`` (another DVC process holds the
repository lock: transient) is retried; a stage that fails on its own fails the same way again, so retrying it would
only burn time.

Used by ``flows/train_dgemm.py``. Test: ``pytest tests/flows/test_train_dgemm_flow.py``.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core import dvc_repro
from hpcrl_core.dvc_repro import DvcStageLockedError, DvcStageResult
from tasks.retries import retry_on


@task(task_run_name="run_dvc_stage-{dvc_stage}", cache_policy=NO_CACHE, retries=3,
      retry_delay_seconds=[15, 60, 120], retry_condition_fn=retry_on(DvcStageLockedError))
def run_dvc_stage(dvc_stage: str, repo_root: str) -> DvcStageResult:
    """Run one DVC stage with its output in the run log; see ``hpcrl_core.dvc_repro.run_dvc_stage``."""
    logger = get_run_logger()
    logger.info("dvc repro %s (in %s)", dvc_stage, repo_root)
    result = dvc_repro.run_dvc_stage(dvc_stage, Path(repo_root), lambda line: logger.info("%s | %s", dvc_stage, line))
    logger.info("stage %s: %s in %.1f s (ran: %s; skipped: %s)", dvc_stage, result.status, result.seconds,
                ", ".join(result.ran) or "-", ", ".join(result.skipped) or "-")
    return result
