"""The rl_dgemm stage's command, killed mid-training with SIGKILL (no chance to clean up), resumes from its last
complete checkpoint when run again, with the SQD curriculum where the killed run left it: what
``dvc repro rl_dgemm`` does after a crash, since ``checkpoints/rl_dgemm`` is a persisted out. In MLflow the resumed
stage continues the killed run.

Run: pytest -m slow tests/flows/test_rl_kill_resume.py (make test-slow)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from hpcrl_core.config import Settings
from tests.flows.stage_process import logged_steps, newest_complete_step, stage_runs, start_stage, wait_for
from tests.training.test_rl import rl_inputs, rl_params

# slow: two stage processes that each load torch, TRL, Prefect and MLflow (~95 s here); the resume logic itself is
# in the default run (tests/training/test_rl.py, test_sft.py, tests/test_tracking.py)
pytestmark = [pytest.mark.integration, pytest.mark.slow]

PROBLEMS = 4
STEPS = 24  # one group (one problem visit) per step


def _stage(tmp_path: Path, params: Path, data: Path, sft: Path, out: Path,
           dirs: Settings) -> subprocess.Popen[str]:
    return start_stage("flows.rl_dgemm", ["--params", str(params), "--data", str(data), "--sft", str(sft),
                                          "--out", str(out)], tmp_path,
                       {"HPCRL_CACHE_DIR": str(dirs.cache_dir), "HPCRL_SCRATCH_DIR": str(dirs.scratch_dir)})


def test_killed_rl_stage_resumes_with_its_curriculum(tmp_path: Path, bench_dirs: Settings) -> None:
    data, sft = rl_inputs(tmp_path, PROBLEMS)
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump(rl_params(max_steps=STEPS, save_steps=2, max_completion_length=8)
                                     .model_dump(mode="json")))
    out = tmp_path / "checkpoints" / "rl_dgemm"

    first = _stage(tmp_path, params, data, sft, out, bench_dirs)
    try:
        wait_for(out / "checkpoint-6" / "trainer_state.json", first, timeout_s=300)
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the whole group: the flow, its executor and any sandboxed run
        first.communicate()
    killed_at = newest_complete_step(out)
    assert 6 <= killed_at < STEPS, "the kill came too late to test a resume"
    saved = json.loads((out / f"checkpoint-{killed_at}" / "sqd_state.json").read_text())
    assert saved["visits"] == killed_at and saved["promotions"] > 0  # one visit (group) per step

    second = _stage(tmp_path, params, data, sft, out, bench_dirs)
    log, _ = second.communicate(timeout=600)
    assert second.returncode == 0, log[-3000:]
    resumed = re.search(r"resumed from (\S+?)[;,]?(?:\s|$)", log)
    assert resumed and resumed.group(1) == str(out / f"checkpoint-{killed_at}"), log[-3000:]

    state = json.loads((out / "final" / "sqd_state.json").read_text())
    assert state["visits"] == STEPS  # every step's visit is counted once across both runs: none lost or repeated
    # The untrained policy writes no kernel, so every visit scores the format-violation penalty, and the plateau
    # rule (window 1) promotes a problem on every second visit at its stage: a problem with v visits sits at stage
    # v // 2 with v % 2 visits there. A resume that lost the curriculum would restart the stages and end lower.
    problems = state["states"].values()
    assert sum(2 * p["stage"] + p["visits"] for p in problems) == STEPS
    assert state["promotions"] == sum(p["stage"] for p in problems)
    history = json.loads((out / "final" / "log_history.json").read_text())
    steps = [e["step"] for e in history if "reward" in e]
    assert steps == list(range(1, STEPS + 1))  # each step logged once: the second run continued the first
    # MLflow: one run, resumed, holding every step (not a RUNNING run beside a new one)
    runs = stage_runs(tmp_path, "rl_dgemm")
    assert [(r.info.status, r.data.tags["hpcrl.resumes"]) for r in runs] == [("FINISHED", "1")], runs
    assert logged_steps(tmp_path, runs[0], "reward") == list(range(1, STEPS + 1))
