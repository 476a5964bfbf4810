"""What people read of the HARGO comparison: the markdown table with intervals, the one-item sentence, the plot.

The report is built by ``hargo.comparison_report`` from rows written out by hand (no model needed).

Run: ``.venv/bin/python -m pytest tests/evaluation/test_hargo_report.py -q``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.evaluation.hargo import comparison_report
from hpcrl_core.evaluation.hargo_report import (
    markdown_table,
    plot_comparison,
    read_comparison_samples,
    what_one_item_is_worth,
    write_comparison,
)


def _rows(mlperf: list[float], plp: list[float] | None = None, prefix: str = "") -> list[dict[str, Any]]:
    rows = [{"family": "mlperf", "id": f"m{i}", "prediction": f"{prefix}{'x' * (10 + 20 * i)}", "gold": "g",
             "score": s, "exact": s == 1.0, "length": 10 + 20 * i, "degenerate": i == 0} for i, s in enumerate(mlperf)]
    rows += [{"family": "plp", "id": f"p{i}", "prediction": f"{prefix}answer {i}", "gold": "g", "score": s,
              "length": 8, "degenerate": False} for i, s in enumerate(plp or [])]
    return rows


@pytest.fixture
def report() -> dict[str, Any]:
    params = parse_params({"evaluate_hargo": {"bootstrap_resamples": 200}})
    sft = _rows([1.0, 0.0, 0.5, 0.0])
    runs = {"grpo": {1: _rows([1.0, 1.0, 0.5, 0.0], prefix="g"), 2: _rows([0.0, 1.0, 0.5, 0.0], prefix="h")}}
    return comparison_report(sft, runs, params)


def test_markdown_table_has_a_row_per_model_with_intervals_and_a_footer(report: dict[str, Any]) -> None:
    table = markdown_table(report)
    lines = table.splitlines()
    assert lines[0].startswith("| model | seeds | WinRate vs SFT | race F1 | PLP sim | MLPerf EM | MLPerf score |")
    sft, grpo = lines[2].split(" | "), lines[3].split(" | ")
    assert sft[:3] == ["| sft", "1", "0.500 [0.500, 0.500]"]
    em = report["grpo"]["metrics"]["mlperf_em"]
    assert grpo[:2] == ["| grpo", "2"] and grpo[5] == f"{em['mean']:.3f} [{em['ci'][0]:.3f}, {em['ci'][1]:.3f}]"
    assert em["mean"] == pytest.approx(0.375)  # seed 1: 2/4 exact, seed 2: 1/4
    assert grpo[3] == "-" and grpo[4] == "-"  # no race, no PLP items
    assert grpo[7] == "0.250" and grpo[8].rstrip(" |") == "40.0"  # 1 of 4 degenerate; lengths 10, 30, 50, 70
    assert "95% interval: percentile bootstrap over items, 200 resamples" in table
    assert "Items: race_c 0, race_fortran 0, mlperf 4, plp 0, all 4." in table
    assert what_one_item_is_worth(report) == lines[-1] and "mlperf 0.2500" in lines[-1]


def test_plot_comparison_writes_a_png_even_with_metrics_missing(report: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "plots" / "eval_hargo.png"
    plot_comparison(report, path)
    image = matplotlib.image.imread(path)
    assert image.shape[0] > 300 and image.shape[1] > 1000  # five panels side by side
    assert list(path.parent.iterdir()) == [path]  # written atomically: no temp file left


def test_the_report_compares_hargo_with_every_other_method_on_paired_items() -> None:
    params = parse_params({"evaluate_hargo": {"bootstrap_resamples": 300}})
    sft = _rows([0.0] * 8)
    hargo_rows = _rows([1.0] * 6 + [0.0] * 2, prefix="a")
    runs = {"grpo": {1: _rows([1.0] * 2 + [0.0] * 6, prefix="g")}, "hargo": {1: hargo_rows},
            "dpo": {1: _rows([1.0] * 6 + [0.0] * 2, prefix="d")}}
    report = comparison_report(sft, runs, params)
    vs = report["meta"]["vs_reference"]
    assert report["meta"]["reference"] == "hargo" and set(vs) == {"grpo", "dpo"}
    assert vs["grpo"]["mlperf_em"]["diff"] == pytest.approx(0.5) and vs["grpo"]["mlperf_em"]["excludes_zero"]
    assert vs["dpo"]["mlperf_em"] == {"diff": 0.0, "ci": [0.0, 0.0], "excludes_zero": False}  # same items right
    table = markdown_table(report).splitlines()
    labels = ("WinRate vs SFT", "race F1", "PLP sim", "MLPerf EM", "MLPerf score")
    head = table.index("| method | " + " | ".join(f"{label} (hargo - method)" for label in labels) + " |")
    grpo = table[head + 2].split(" | ")
    assert grpo[0] == "| grpo" and grpo[4].startswith("+0.500 [") and grpo[4].endswith("] *")
    assert table[head + 3].split(" | ")[4] == "+0.000 [+0.000, +0.000]"
    alone = comparison_report(sft, {"hargo": {1: hargo_rows}}, params)
    assert alone["meta"]["vs_reference"] == {} and alone["meta"]["reference"] is None
    assert "(hargo - method)" not in markdown_table(alone)


def test_a_report_rebuilt_from_its_samples_is_the_same_report(tmp_path: Path) -> None:
    params = parse_params({"evaluate_hargo": {"bootstrap_resamples": 200}})
    sft = _rows([1.0, 0.0, 0.5, 0.0], [0.4, 0.7])
    runs = {"hargo": {1: _rows([1.0, 1.0, 0.5, 0.0], [0.5, 0.7], "a"),
                      2: _rows([0.0, 1.0, 0.5, 0.0], [0.4, 0.9], "b")},
            "grpo": {1: _rows([1.0, 0.0, 0.0, 0.0], [0.4, 0.6], "c")}}
    report = comparison_report(sft, runs, params)
    out = tmp_path / "eval_hargo.json"
    write_comparison(report, sft, runs, out)
    sft_back, runs_back = read_comparison_samples(tmp_path / "eval_hargo_samples.jsonl")
    assert sft_back == sft and runs_back == runs
    assert comparison_report(sft_back, runs_back, params) == report
    (tmp_path / "bad.jsonl").write_text('{"family": "plp"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: a row without 'model'"):
        read_comparison_samples(tmp_path / "bad.jsonl")
