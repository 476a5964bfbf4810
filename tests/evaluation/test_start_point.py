"""The HARGO start point's bars (hpcrl_core/evaluation/start_point.py).

Run: pytest tests/evaluation/test_start_point.py
"""

from __future__ import annotations

from typing import Any

from hpcrl_core.evaluation.start_point import BARS, bars_line, start_point_report


def _row(family: str, i: int, score: float, **extra: Any) -> dict[str, Any]:
    return {"family": family, "id": f"{family}-{i}", "prediction": "x" * (10 + i), "gold": "g", "score": score,
            "length": 10 + i, "degenerate": False, **extra}


def rows(race_right: int, mlperf_scores: list[float], plp_cosines: list[float]) -> list[dict[str, Any]]:
    out = []
    for i in range(10):  # 10 race_c items, gold alternating yes/no; the first race_right verdicts are right
        gold = "yes" if i % 2 == 0 else "no"
        wrong = "no" if gold == "yes" else "yes"
        verdict = gold if i < race_right else wrong
        out.append(_row("race_c", i, 1.0 if verdict == gold else 0.0, gold=gold, parsed=verdict, prediction=verdict))
    out += [_row("mlperf", i, s, exact=s == 1.0) for i, s in enumerate(mlperf_scores)]
    out += [_row("plp", i, c) for i, c in enumerate(plp_cosines)]
    return out


def test_a_start_point_above_every_bar_meets_all() -> None:
    report = start_point_report(rows(10, [1.0, 0.5, 0.2, 0.1], [0.7, 0.65]))
    assert report["race_f1"] == 1.0 and report["mlperf_avg_score"] == 0.45 and report["plp_similarity"] == 0.675
    assert report["meets"] == dict.fromkeys(BARS, True) and report["meets_all"]
    assert "race_f1 1.000 (bar 0.85: met)" in bars_line(report)


def test_a_missed_bar_is_reported() -> None:
    # 8 of 10 race verdicts right: tp 4, fn 1, fp 1 -> F1 0.8 < 0.85; MLPerf 0.3 < 0.35; PLP exactly at the bar
    report = start_point_report(rows(8, [0.5, 0.1], [0.6, 0.6]))
    assert abs(report["race_f1"] - 0.8) < 1e-12 and abs(report["mlperf_avg_score"] - 0.3) < 1e-12
    assert report["meets"] == {"race_f1": False, "mlperf_avg_score": False, "plp_similarity": True}
    assert not report["meets_all"] and "MISSED" in bars_line(report)


def test_a_family_without_items_misses_its_bar() -> None:
    report = start_point_report(rows(10, [1.0], []))
    assert report["plp_similarity"] is None and report["meets"]["plp_similarity"] is False
    assert "plp_similarity n/a" in bars_line(report)
