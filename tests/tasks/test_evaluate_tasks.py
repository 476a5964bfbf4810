"""The evaluate stage's curve task (tasks/evaluate.py): it plots the RL history and logs when the run first sampled a
fast kernel. Run: pytest tests/tasks/test_evaluate_tasks.py"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import tasks.evaluate
from tests.evaluation.test_discovery import history


@pytest.fixture(autouse=True)
def plain_logger(monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's run logger outside a flow run: a standard logger that caplog sees."""
    monkeypatch.setattr(tasks.evaluate, "get_run_logger", lambda: logging.getLogger("hpcrl.test.evaluate"))


def test_curves_are_plotted_and_the_first_fast_kernel_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    log_history = tmp_path / "log_history.json"
    log_history.write_text(json.dumps(history([10.0] * 4 + [55.0] * 16)))
    with caplog.at_level(logging.INFO):
        assert tasks.evaluate.plot_training_curves.fn(log_history, tmp_path / "steps.png")
    assert (tmp_path / "steps.png").stat().st_size > 0
    assert "first at step 5; kept (best 1.10x, last steps 1.10x)" in caplog.text


def test_a_history_without_reward_figures_is_plotted_without_a_verdict(tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    log_history = tmp_path / "log_history.json"
    log_history.write_text(json.dumps([{"step": 1, "reward": 0.5}]))
    with caplog.at_level(logging.INFO):
        assert tasks.evaluate.plot_training_curves.fn(log_history, tmp_path / "steps.png")
        assert not tasks.evaluate.plot_training_curves.fn(tmp_path / "missing.json", tmp_path / "other.png")
    assert "RL training" not in caplog.text and not (tmp_path / "other.png").exists()
