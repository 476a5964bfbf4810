"""Tests of checkpoint staleness. Run: pytest tests/training/test_checkpoints.py"""

from __future__ import annotations

from pathlib import Path

from hpcrl_core.training.checkpoints import inputs_fingerprint, reset_if_stale


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
