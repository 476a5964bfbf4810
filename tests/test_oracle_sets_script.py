"""benchmarks/oracle_sets.py: per permitted set, pooled over reports, the oracle and each model's ratios, eval-only
sets first and marked, kinds read from the samples beside a report; per report the eval-only/drawn split; a
report without an oracle table refused by name.

Run: pytest tests/test_oracle_sets_script.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.oracle_sets import main

HELD = ["openmp", "simd"]  # one of problems.HELD_OUT_PERMITTED
DRAWN = ["loop_reorder"]


def _entry(permitted: list[str], rl: float | None, sft: float, kernel: str = "k1") -> dict:
    return {"permitted": permitted, "oracle_kernel": kernel, "oracle_gflops": 10.0, "rl_ratio": rl, "sft_ratio": sft}


def _report(folder: Path, table: list[dict], samples: list[dict] | None = None) -> Path:
    folder.mkdir(parents=True)
    (folder / "eval_dgemm.json").write_text(json.dumps({"oracle": {"table": table}, "rl": {}, "sft": {}}))
    if samples is not None:
        (folder / "eval_dgemm_samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return folder


def _sample(permitted: list[str], kind: str, status: str = "ok") -> dict:
    return {"model": "rl", "permitted": permitted, "status": status, "completion": f"```c\n// plan: {kind}: x\n```"}


def test_sets_pooled_over_reports_and_split_per_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _report(tmp_path / "a", [_entry(HELD, 0.2, 0.3), _entry(HELD, 0.4, 0.3), _entry(DRAWN, 0.9, 0.5)],
                    [_sample(HELD, "naive"), _sample(HELD, "naive"), _sample(HELD, "blocked"),
                     _sample(HELD, "packed", status="wrong_result"), _sample(DRAWN, "reorder")])
    second = _report(tmp_path / "b", [_entry(list(reversed(HELD)), 0.6, 0.3, "k2"), _entry(DRAWN, None, 0.95)])
    assert main([str(first), str(second / "eval_dgemm.json")]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    # eval-only set first; its three problem-runs pooled (the order of a set's techniques does not matter)
    assert rows[1] == "| openmp, simd | yes | 3 | k1 | 10.0 | 0.30 | 0 | - | 0.40 | 0 | naive (2) |"
    # a problem where RL has no ratio is counted as a problem-run but not in RL's median
    assert rows[2] == "| loop_reorder |  | 2 | k1 | 10.0 | 0.72 | 1 | - | 0.90 | 1 | reorder (1) |"
    assert ("- a/eval_dgemm.json rl: ratio 0.40 (eval-only sets 0.30 over 2, drawn 0.90 over 1); 1 of 3 problems at "
            "0.85x oracle") in out
    assert "- b/eval_dgemm.json rl: ratio 0.60 (eval-only sets 0.60 over 1, drawn - over 0)" in out


def test_a_report_without_the_yardstick_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "eval_dgemm.json").write_text(json.dumps({"rl": {}, "sft": {}}))
    assert main([str(old)]) == 2
    assert "no oracle table" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert "no eval_dgemm.json there" in capsys.readouterr().err


def test_the_oracle_kernels_sft_records_are_counted_from_the_data(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run = _report(tmp_path / "a", [_entry(HELD, 0.2, 0.3, "rare"), _entry(DRAWN, 0.9, 0.5, "common")])
    (tmp_path / "data" / "dgemm").mkdir(parents=True)
    (tmp_path / "data" / "dgemm" / "train.jsonl").write_text("".join(
        json.dumps({"metadata": {"kernel_name": name}}) + "\n" for name in ["common"] * 3 + ["rare", "other"]))
    assert main([str(run), "--data", str(tmp_path / "data"), "--models", "rl"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert rows[0].startswith("| permitted set | eval-only | problem-runs | oracle kernel | oracle GFLOPS | oracle's")
    assert rows[1] == "| openmp, simd | yes | 1 | rare | 10.0 | 1 | 0.20 | 0 | - |"
    assert rows[2] == "| loop_reorder |  | 1 | common | 10.0 | 3 | 0.90 | 1 | - |"
    assert main([str(run), "--data", str(tmp_path / "nowhere")]) == 2
    assert "no SFT data there" in capsys.readouterr().err
