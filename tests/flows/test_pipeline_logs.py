"""The stage's own Prefect log lines reach the pipeline's log once: no second time, level or "Task run" prefix inside
the message (the stage's run name in brackets instead), the stage's level kept; the stage's flow reports to the
pipeline's Prefect server instead of starting a temporary one.

Run: pytest tests/flows/test_pipeline_logs.py
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tasks.pipeline import STAGE_LOG_ENV, log_line, stage_env

# what a stage command does: a Prefect flow with a task that logs at two levels, and a plain print
STAGE = textwrap.dedent("""
    from prefect import flow, get_run_logger, task

    @task
    def work():
        get_run_logger().info("step one")
        get_run_logger().warning("disk nearly full")

    @flow(name="stage")
    def stage():
        print("a plain print")
        work()

    stage()
""")
TIMESTAMP = re.compile(r"\d\d:\d\d:\d\d\.\d{3} \|")


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[int, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append((record.levelno, record.getMessage()))


def test_a_stage_is_pointed_at_the_server_its_pipeline_reports_to(prefect_server: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    env = stage_env()
    assert env["PREFECT_API_URL"] == str(PREFECT_API_URL.value()).rstrip("/") and env["PREFECT_API_URL"]
    assert {k: env[k] for k in STAGE_LOG_ENV} == STAGE_LOG_ENV
    monkeypatch.setenv("PREFECT_API_URL", "http://elsewhere:4200/api")  # a configured server: inherited as it is
    assert stage_env() == STAGE_LOG_ENV


def test_a_stage_flow_logs_without_time_or_level_and_keeps_its_levels(tmp_path: Path, prefect_server: None,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    env = {**os.environ, **stage_env(), "PREFECT_HOME": str(tmp_path / "prefect"), "PYTHONUNBUFFERED": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true"}
    out = subprocess.run([sys.executable, "-c", STAGE], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "temporary server" not in out.stdout + out.stderr  # it reported to the test's server
    logger = logging.getLogger("test_pipeline")
    logger.propagate, logger.level = False, logging.DEBUG
    handler = _Records()
    logger.addHandler(handler)
    for line in (out.stdout + out.stderr).splitlines():
        log_line(logger, line)
    records = handler.records
    assert (logging.INFO, "a plain print") in records
    step = [(level, msg) for level, msg in records if msg.endswith("step one")]
    assert step and step[0][0] == logging.INFO and re.fullmatch(r"\[work-\w+\] step one", step[0][1])
    assert [level for level, msg in records if msg.endswith("disk nearly full")] == [logging.WARNING]
    assert not [msg for _, msg in records if TIMESTAMP.search(msg) or "| INFO" in msg or "Task run" in msg
                or "Flow run" in msg], records


def test_lines_without_a_level_are_info_and_pass_unchanged() -> None:
    logger = logging.getLogger("test_pipeline.plain")
    logger.propagate, logger.level = False, logging.DEBUG
    handler = _Records()
    logger.addHandler(handler)
    for line in ("Running stage 'sft':", " 40%|####      | 4/10 [00:01<00:01,  3.1it/s]", "ERROR|boom", "INFO no bar"):
        log_line(logger, line)
    assert handler.records == [(logging.INFO, "Running stage 'sft':"),
                               (logging.INFO, " 40%|####      | 4/10 [00:01<00:01,  3.1it/s]"),
                               (logging.ERROR, "boom"), (logging.INFO, "INFO no bar")]
