"""Tests of checkpoint staleness and completeness. Run: pytest tests/training/test_checkpoints.py"""

from __future__ import annotations

import json
from pathlib import Path

from hpcrl_core.training.checkpoints import inputs_fingerprint, last_checkpoint, reset_if_stale


def test_fingerprint_follows_bytes_and_settings(tmp_path: Path) -> None:
    f = tmp_path / "train.jsonl"
    f.write_text("a\n")
    base = inputs_fingerprint([f], {"lr": 1e-3})
    assert inputs_fingerprint([f], {"lr": 1e-3}) == base
    assert inputs_fingerprint([f], {"lr": 2e-3}) != base
    f.write_text("b\n")
    assert inputs_fingerprint([f], {"lr": 1e-3}) != base


def test_reset_only_when_stale(tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    assert reset_if_stale(out, "one") is False  # empty: nothing to clear
    (out / "checkpoint-2").mkdir()
    assert reset_if_stale(out, "one") is False and (out / "checkpoint-2").exists()  # same inputs: keep
    assert reset_if_stale(out, "two") is True and not (out / "checkpoint-2").exists()  # other inputs: clear
    unmarked = tmp_path / "old"
    (unmarked / "checkpoint-9").mkdir(parents=True)
    assert reset_if_stale(unmarked, "x") is True  # checkpoints of unknown origin are not resumed


def _checkpoint(out: Path, step: int, state: str | None) -> Path:
    folder = out / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    if state is not None:
        (folder / "trainer_state.json").write_text(state)
    return folder


def test_last_checkpoint_is_the_newest_complete_one_by_step_number(tmp_path: Path) -> None:
    assert last_checkpoint(tmp_path / "missing") is None
    assert last_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 9, json.dumps({"global_step": 9}))
    _checkpoint(tmp_path, 10, json.dumps({"global_step": 10}))  # 10 > 9 by number, though "10" < "9" as text
    (tmp_path / "checkpoint-final-notes").mkdir()
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-10"


def test_half_written_checkpoints_are_skipped_and_deleted(tmp_path: Path) -> None:
    good = _checkpoint(tmp_path, 20, json.dumps({"global_step": 20}))
    no_state = _checkpoint(tmp_path, 30, None)  # killed before the state file
    torn = _checkpoint(tmp_path, 40, '{"global_step": 4')  # killed while writing it
    assert last_checkpoint(tmp_path) == good
    assert good.exists() and not no_state.exists() and not torn.exists()
    only_bad = tmp_path / "other"
    _checkpoint(only_bad, 5, None)
    assert last_checkpoint(only_bad) is None and not any(only_bad.iterdir())
