"""Reports: the one writer (JSON, no NaN, atomic), sample files, and the fixed headline ``make run`` prints.

Run: pytest tests/evaluation/test_report.py
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from hpcrl_core.evaluation.report import (
    headline,
    markdown_table,
    oracle_line,
    read_samples,
    samples_path_for,
    text_table,
    write_report,
    write_samples,
)

SFT = {"dgemm": {"verified_rate": 0.9, "respect_rate": 0.97, "gflops_median": 14.5, "gflops_max": 28.8},
       "race": {"f1": 0.85}, "mlperf": {"em": 0.0, "avg_score": 0.03}, "plp": {"similarity": 0.43}}
EVAL = {"sft": {"verified_rate": 0.897, "respect_rate": 1.0, "gflops_median": 14.5, "gflops_best": 28.8,
                "best_vs_numpy": 0.4},
        "rl": {"verified_rate": 1.0, "respect_rate": 1.0, "gflops_median": 15.0, "gflops_best": 29.2,
               "best_vs_numpy": 0.42, "winrate_vs_sft": 0.93, "oracle_ratio": 0.74, "oracle_ratio_rich": 0.3,
               "headroom_closed": 0.51, "distinct_kernels": 17},
        "oracle": {"problems_with_oracle": 78, "problems_without_oracle": 2, "corpus_distinct": 250,
                   "corpus_verified": 249, "corpus_cached": 240, "corpus_timings": 1000,
                   "sizes": [208, 240, 272, 304], "table": []},
        "meta": {"problems": 80}}


def test_headline_reads_fixed_keys_from_both_reports() -> None:
    rows = {label: (a, b) for label, a, b in headline(SFT, EVAL)}
    assert rows["verified rate"] == (0.897, 1.0)  # the comparison's SFT block wins over sft.json
    assert rows["best GFLOPS"] == (28.8, 29.2) and rows["WinRate vs SFT"] == (None, 0.93)
    assert rows["race F1"] == (0.85, None) and rows["PLP similarity"] == (0.43, None)
    assert rows["oracle ratio"] == (None, 0.74) and rows["oracle ratio (rich)"] == (None, 0.3)
    assert rows["headroom closed"] == (None, 0.51) and rows["distinct kernels"] == (None, 17)


def test_oracle_line_states_coverage_or_its_absence() -> None:
    line = oracle_line(EVAL)
    assert "78 of 80 problems" in line and "2 without" in line and "n=208,240,272,304" in line
    assert "240 of 1000 timings from the result cache" in line and "distinct oracle kernels" not in line
    counted = oracle_line({**EVAL, "oracle": {**EVAL["oracle"], "distinct_kernels": 18, "held_out_problems": 40}})
    assert "18 distinct oracle kernels; 40 problems on technique sets" in counted
    assert "none in this report" in oracle_line({"sft": {}, "rl": {}}) and "none" in oracle_line(None)


def test_headline_without_the_comparison_falls_back_to_the_sft_report() -> None:
    rows = {label: (a, b) for label, a, b in headline(SFT, None)}
    assert rows["verified rate"] == (0.9, None) and rows["best GFLOPS"] == (28.8, None)
    assert rows["best vs numpy"] == (None, None)
    assert all(b is None for _, (_, b) in rows.items())
    assert all(a is None and b is None for _, a, b in headline(None, None))


def test_tables_show_every_row_and_a_dash_for_missing_values() -> None:
    rows = headline(SFT, EVAL)
    text, md = text_table(rows), markdown_table(rows)
    assert len(text.splitlines()) == len(rows) + 1 and len(md.splitlines()) == len(rows) + 2
    assert "0.930" in text and "| WinRate vs SFT | - | 0.930 |" in md and "14.5" in text


def test_writer_sorts_keys_refuses_nan_and_samples_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "reports" / "eval_dgemm.json"
    write_report({"b": 1, "a": {"d": 2, "c": 3}}, out)
    assert out.read_text().index('"a"') < out.read_text().index('"b"') and json.loads(out.read_text())["a"]["c"] == 3
    with pytest.raises(ValueError):
        write_report({"x": math.nan}, tmp_path / "bad.json")
    rows = [{"family": "dgemm", "model": "rl", "status": "ok", "gflops": 1.5}, {"family": "race_c", "id": "x"}]
    path = samples_path_for(out)
    assert path.name == "eval_dgemm_samples.jsonl"
    write_samples(rows, path)
    assert read_samples(path) == rows
