"""The sft stage's command, killed mid-training with SIGKILL (no chance to clean up), resumes from its last
checkpoint when run again: what ``dvc repro sft`` does after a crash, since ``checkpoints/sft`` is a persisted out.
In MLflow the resumed stage continues the killed run, which therefore holds the whole training curve.

Run: pytest -m slow tests/flows/test_sft_kill_resume.py (make test-slow)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from tests.flows.stage_process import logged_steps, newest_complete_step, stage_runs, start_stage, wait_for
from tests.flows.test_sft_flow import flow_data, params_file

# slow: two stage processes that each load torch, TRL, Prefect and MLflow (~95 s here); the resume logic itself is
# in the default run (tests/training/test_rl.py, test_sft.py, tests/test_tracking.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEPS = 150


def _stage(tmp_path: Path, params: Path, data: Path, out: Path) -> subprocess.Popen[str]:
    return start_stage("flows.sft", ["--params", str(params), "--data", str(data), "--out", str(out),
                                     "--report", str(tmp_path / "reports" / "sft.json")], tmp_path)


def test_killed_stage_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    data = flow_data(tmp_path / "data")
    params = params_file(tmp_path, max_steps=STEPS, save_steps=10, save_total_limit=2, logging_steps=10)
    out = tmp_path / "checkpoints" / "sft"

    first = _stage(tmp_path, params, data, out)
    try:
        wait_for(out / "checkpoint-20" / "trainer_state.json", first, timeout_s=300)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the whole group: the flow and anything it started
        first.communicate()
    killed_at = newest_complete_step(out)
    assert 20 <= killed_at < STEPS, "the kill came too late to test a resume"
    assert not (out / "final").exists()

    second = _stage(tmp_path, params, data, out)
    log, _ = second.communicate(timeout=600)
    assert second.returncode == 0, log[-3000:]
    resumed = re.search(r"resumed from (\S+)", log)
    assert resumed, log[-3000:]
    # From the newest complete checkpoint (a half-written newer one is discarded), never from scratch.
    assert resumed.group(1).rstrip(";,") == str(out / f"checkpoint-{killed_at}")
    state = json.loads((out / f"checkpoint-{STEPS}" / "trainer_state.json").read_text())
    assert state["global_step"] == STEPS
    assert (out / "final" / "config.json").is_file()
    # Each logged step appears once: the second run continued the first one's history instead of redoing it.
    history = [e["step"] for e in state["log_history"] if "loss" in e]
    assert history == list(range(10, STEPS + 1, 10))
    # MLflow: one run, resumed, holding the whole curve (not a RUNNING run beside a new one)
    runs = stage_runs(tmp_path, "sft")
    assert [(r.info.status, r.data.tags["hpcrl.resumes"]) for r in runs] == [("FINISHED", "1")], runs
    assert logged_steps(tmp_path, runs[0], "loss") == list(range(10, STEPS + 1, 10))
