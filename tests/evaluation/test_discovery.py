"""When an RL run first sampled a fast kernel (hpcrl_core/evaluation/discovery.py), on hand-made log histories.

Run: pytest tests/evaluation/test_discovery.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.discovery import describe, discovery, history_file, read_history, step_ratios


def history(best: list[float], ref: float = 50.0) -> list[dict]:
    """A log history whose step s (from 1) sampled a best kernel of best[s - 1] GFLOPS against numpy at ``ref``."""
    return [{"step": s, "loss": 0.1, "reward/gflops_max": g, "reward/reference_gflops": ref}
            for s, g in enumerate(best, 1)]


def test_the_four_verdicts() -> None:
    # 20 steps; fast = 0.8 x 50 = 40 GFLOPS; the tail is the last 3 steps (15% of 20)
    never = discovery(history([10.0] * 19 + [39.9]))
    assert (never.verdict, never.first_step, never.best, never.steps) == ("never", None, pytest.approx(0.798), 20)
    kept = discovery(history([10.0] * 4 + [55.0] * 16))
    assert (kept.verdict, kept.first_step, kept.tail_best) == ("kept", 5, pytest.approx(1.1))
    late = discovery(history([10.0] * 12 + [45.0] * 8))
    assert (late.verdict, late.first_step) == ("late", 13)
    lost = discovery(history([10.0] * 4 + [60.0] * 12 + [30.0] * 4))
    assert (lost.verdict, lost.first_step, lost.best, lost.tail_best) == ("lost", 5, pytest.approx(1.2),
                                                                           pytest.approx(0.6))
    assert describe(kept) == "kept (step 5, best 1.10x)" and describe(never) == "never (best 0.80x)"


def test_ratios_follow_the_reference_of_each_step() -> None:
    # 45 GFLOPS is fast against numpy at 50 but not at 60: the same kernel on a faster core
    steps = [{"step": 1, "reward/gflops_max": 45.0, "reward/reference_gflops": 60.0},
             {"step": 2, "reward/gflops_max": 45.0, "reward/reference_gflops": 50.0}]
    assert discovery(steps).first_step == 2
    assert discovery(steps, threshold=0.7).first_step == 1


def test_entries_without_both_figures_are_skipped_and_a_history_without_any_is_refused() -> None:
    mixed = [{"step": 1, "train_runtime": 9.0}, {"step": 2, "reward/gflops_max": 50.0},
             {"step": 3, "reward/gflops_max": 50.0, "reward/reference_gflops": 0.0},
             {"step": 4, "reward/gflops_max": 48.0, "reward/reference_gflops": 50.0}]
    assert step_ratios(mixed) == [(4, pytest.approx(0.96))]
    with pytest.raises(DataError, match="not the history of a DGEMM RL run"):
        discovery([{"step": 1, "loss": 0.3}, {"train_runtime": 1.0}])
    with pytest.raises(ValueError, match="tail"):
        discovery(history([50.0]), tail=0.0)


def test_the_history_is_found_in_a_run_folder_or_a_final_folder(tmp_path: Path) -> None:
    run, final = tmp_path / "sqd-sft7-s1", tmp_path / "final"
    (run / "rl" / "final").mkdir(parents=True)
    final.mkdir()
    (run / "rl" / "final" / "log_history.json").write_text(json.dumps(history([10.0, 45.0])))
    (final / "log_history.json").write_text(json.dumps(history([50.0])))
    assert history_file(run) == run / "rl" / "final" / "log_history.json"
    assert discovery(read_history(run)).first_step == 2 and discovery(read_history(final)).first_step == 1
    with pytest.raises(DataError, match="no rl/final/log_history.json or log_history.json"):
        history_file(tmp_path)


@pytest.mark.parametrize("text", ["{not json", '{"step": 1}', "[1, 2]"])
def test_a_history_that_is_not_a_list_of_steps_is_refused_by_name(tmp_path: Path, text: str) -> None:
    (tmp_path / "log_history.json").write_text(text)
    with pytest.raises(DataError, match="log_history.json"):
        read_history(tmp_path)


def test_the_history_file_name_is_the_one_training_writes() -> None:
    from hpcrl_core.evaluation import discovery as module
    from hpcrl_core.training.checkpoints import LOG_HISTORY

    assert module.LOG_HISTORY == LOG_HISTORY
