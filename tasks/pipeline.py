"""Prefect task of the pipelines: one DVC stage through ``hpcrl_core.dvc_repro.run_dvc_stage``, its output in the
run log line by line.

The stage's command runs a Prefect flow of its own, whose console lines would repeat what this task's logger
prints already (``07:21:29.123 | INFO | Task run 'prepare_race-536' - ...`` inside ``07:21:29.500 | INFO | Task
run 'run_dvc_stage-prepare' - ``). So the command gets a log format without time and level and with its run's name
in brackets (``STAGE_LOG_ENV``): ``Task run 'run_dvc_stage-prepare' - [prepare_race-536] ...``. Its level travels
as a ``LEVEL|`` prefix that ``log_line`` strips, logging the line at that level. Lines of DVC, progress bars and
prints pass as they are.

The command also gets the API of the Prefect server this task reports to (``stage_env``): without
``PREFECT_API_URL`` (``make run`` on a bare machine) every stage's flow would otherwise start a temporary server of its
own, about 20 s each, and its runs would vanish with it; with it they land beside the pipeline's run.

No Prefect caching: DVC owns skip-if-unchanged. Only ``DvcStageLockedError`` (another DVC process holds the
repository lock: transient) is retried; a stage that fails on its own fails the same way again, so retrying it would
only burn time.

Used by ``flows/train_dgemm.py`` and ``flows/train_hargo.py``. Test: ``pytest tests/flows/test_pipeline_logs.py
tests/flows/test_train_dgemm_flow.py tests/flows/test_hargo_flows.py``.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core import dvc_repro
from hpcrl_core.dvc_repro import DvcStageLockedError, DvcStageResult
from tasks.retries import retry_on

# Prefect's logging.yml keys, overridden through the environment (PREFECT_LOGGING_<PATH>)
STAGE_LOG_ENV = {
    "PREFECT_LOGGING_FORMATTERS_STANDARD_FORMAT": "%(levelname)s|[%(name)s] %(message)s",
    "PREFECT_LOGGING_FORMATTERS_STANDARD_FLOW_RUN_FMT": "%(levelname)s|[%(flow_run_name)s] %(message)s",
    "PREFECT_LOGGING_FORMATTERS_STANDARD_TASK_RUN_FMT": "%(levelname)s|[%(task_run_name)s] %(message)s",
}
_LEVEL = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL)\|")


def log_line(logger: Any, line: str) -> None:
    """Log one output line of the stage: at the level its ``LEVEL|`` prefix names (prefix removed), else INFO."""
    if m := _LEVEL.match(line):
        logger.log(logging.getLevelName(m.group(1)), "%s", line[m.end():])
    else:
        logger.info("%s", line)


def stage_env() -> dict[str, str]:
    """What a stage's command gets on top of this environment: ``STAGE_LOG_ENV`` and, unless ``PREFECT_API_URL`` is
    set already, the API of the server the calling flow reports to (the temporary one Prefect started for it)."""
    env = dict(STAGE_LOG_ENV)
    if not os.environ.get("PREFECT_API_URL"):
        from prefect.client.orchestration import get_client

        with get_client(sync_client=True) as client:  # the flow's own client (re-entered) or a new one, closed after
            env["PREFECT_API_URL"] = str(client.api_url).rstrip("/")
    return env


@task(task_run_name="run_dvc_stage-{dvc_stage}", cache_policy=NO_CACHE, retries=3,
      retry_delay_seconds=[15, 60, 120], retry_condition_fn=retry_on(DvcStageLockedError))
def run_dvc_stage(dvc_stage: str, repo_root: str) -> DvcStageResult:
    """Run one DVC stage with its output in the run log; see ``hpcrl_core.dvc_repro.run_dvc_stage``."""
    logger = get_run_logger()
    logger.info("dvc repro %s (in %s)", dvc_stage, repo_root)
    result = dvc_repro.run_dvc_stage(dvc_stage, Path(repo_root), lambda line: log_line(logger, line), stage_env())
    logger.info("stage %s: %s in %.1f s (ran: %s; skipped: %s)", dvc_stage, result.status, result.seconds,
                ", ".join(result.ran) or "-", ", ".join(result.skipped) or "-")
    return result
