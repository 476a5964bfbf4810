"""benchmarks/rl_discovery.py: one row per run folder, in both layouts, with the held-out figures when a report is
there, the verdict counts, and a folder without a log history named.

Run: pytest tests/test_rl_discovery_script.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.rl_discovery import main
from tests.evaluation.test_discovery import history


def _run(folder: Path, best: list[float], rl: dict | None = None, final_only: bool = False) -> Path:
    final = folder if final_only else folder / "rl" / "final"
    final.mkdir(parents=True)
    (final / "log_history.json").write_text(json.dumps(history(best)))
    if rl is not None:
        (folder / "eval_dgemm.json").write_text(json.dumps({"rl": rl, "sft": {}, "meta": {}}))
    return folder


def test_rows_and_verdict_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = {"best_vs_numpy": 1.1, "oracle_ratio": 0.97, "oracle_ratio_rich": 0.99, "distinct_kernels": 20}
    slow = {"best_vs_numpy": 0.55, "oracle_ratio": 0.5, "oracle_ratio_rich": 0.49, "distinct_kernels": 17}
    runs = [_run(tmp_path / "x" / "sqd-sft1-s1", [10.0] * 4 + [55.0] * 16, good),
            _run(tmp_path / "x" / "sqd-sft1-s2", [10.0] * 20, slow),
            _run(tmp_path / "final", [10.0] * 4 + [60.0] * 12 + [30.0] * 4, final_only=True)]
    assert main([str(r) for r in runs]) == 0
    out = capsys.readouterr().out
    assert "| x/sqd-sft1-s1 | 20 | kept | 5 | 1.10 | 1.10 | 1.10 | 0.97 | 0.99 | 20 | met |" in out
    assert "| x/sqd-sft1-s2 | 20 | never | - | 0.20 | 0.20 | 0.55 | 0.50 | 0.49 | 17 | missed |" in out
    assert f"| {tmp_path / 'final'} | 20 | lost | 5 | 1.20 | 0.60 | - | - | - | - | - |" in out
    assert "- never: 1 runs; fast-kernel bars met in 0 of the 1 evaluated" in out
    assert "- kept: 1 runs; fast-kernel bars met in 1 of the 1 evaluated" in out
    assert "- lost: 1 runs; fast-kernel bars met in 0 of the 0 evaluated" in out


def test_a_folder_without_a_history_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sft-s7").mkdir()
    assert main([str(tmp_path / "sft-s7")]) == 2
    assert "sft-s7: no rl/final/log_history.json" in capsys.readouterr().err
