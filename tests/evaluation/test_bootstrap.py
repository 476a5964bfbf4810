"""The comparison's confidence intervals: a paired, stratified percentile bootstrap over items.

Rows are written out by hand (the schema of ``hargo.score_items``), so the expected values can be computed here.

Run: ``.venv/bin/python -m pytest tests/evaluation/test_bootstrap.py -q``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hpcrl_core.evaluation.bootstrap import (
    headline_intervals,
    paired_differences,
    percentile_interval,
    resample_counts,
)

Row = dict[str, Any]


def _mlperf(scores: list[float], prefix: str = "") -> list[Row]:
    return [{"family": "mlperf", "id": f"m{i}", "prediction": f"{prefix}{i}-{s}", "gold": "x", "score": s,
             "exact": s == 1.0, "length": 10, "degenerate": False} for i, s in enumerate(scores)]


def _race(pairs: list[tuple[str, float]], family: str = "race_c") -> list[Row]:
    """Race rows from (gold, score) pairs; the prediction is the verdict that gets that score."""
    return [{"family": family, "id": f"{family}{i}", "prediction": "yes" if (g == "yes") == bool(s) else "no",
             "gold": g, "score": s, "length": 3, "degenerate": False} for i, (g, s) in enumerate(pairs)]


def _intervals(sft: list[Row], groups: dict[str, dict[Any, list[Row]]], resamples: int = 2000, seed: int = 7
               ) -> dict[str, Any]:
    return headline_intervals(sft, {"sft": {"sft": sft}, **groups}, resamples=resamples, confidence=0.95, seed=seed)


def test_resample_counts_are_draws_with_replacement_after_the_observed_row() -> None:
    a, b, empty = resample_counts([5, 3, 0], resamples=400, seed=1)
    assert a.shape == (401, 5) and b.shape == (401, 3) and empty.shape == (401, 0)
    assert (a[0] == 1).all() and (a.sum(axis=1) == 5).all() and (b.sum(axis=1) == 3).all()
    assert a[1:].max() > 1 and (a[1:] == 0).any()  # some items drawn twice, some not at all
    assert a[1:].mean(axis=0) == pytest.approx(np.ones(5), abs=0.15)  # every item equally likely
    again = resample_counts([5, 3, 0], resamples=400, seed=1)
    assert all((x == y).all() for x, y in zip((a, b), again, strict=False))
    assert not (resample_counts([5], resamples=400, seed=2)[0] == a).all()
    with pytest.raises(ValueError, match="resamples=0"):
        resample_counts([5], resamples=0, seed=1)


def test_interval_of_a_half_right_mean_matches_its_standard_error() -> None:
    n = 400
    scores = [1.0, 0.0] * (n // 2)
    out = _intervals(_mlperf(scores), {})["sft"]["mlperf_em"]
    lo, hi = out["ci"]
    assert out["mean"] == 0.5 and lo < 0.5 < hi
    half_width = 1.96 * (0.25 / n) ** 0.5  # normal approximation: 0.049
    assert (hi - lo) / 2 == pytest.approx(half_width, rel=0.15)


def test_interval_contains_the_estimate_narrows_with_items_and_is_seeded() -> None:
    pattern = [1.0, 0.5, 0.0, 0.2, 1.0]
    small, large = _mlperf(pattern * 8), _mlperf(pattern * 80)
    widths = []
    for rows in (small, large):
        m = _intervals(rows, {})["sft"]["mlperf_avg_score"]
        assert m["ci"][0] <= m["mean"] <= m["ci"][1] and m["mean"] == pytest.approx(0.54)
        widths.append(m["ci"][1] - m["ci"][0])
    assert widths[1] < widths[0] / 2.5  # 10x the items: about 1/sqrt(10) the width
    first = _intervals(small, {}, seed=3)["sft"]["mlperf_avg_score"]["ci"]
    assert first == _intervals(small, {}, seed=3)["sft"]["mlperf_avg_score"]["ci"]
    assert first != _intervals(small, {}, seed=4)["sft"]["mlperf_avg_score"]["ci"]


def test_a_constant_metric_has_a_zero_width_interval() -> None:
    sft = _mlperf([1.0] * 30)
    out = _intervals(sft, {"grpo": {1: _mlperf([1.0] * 30, prefix="other ")}})
    assert out["grpo"]["mlperf_em"] == {"mean": 1.0, "ci": [1.0, 1.0], "seeds": {"1": 1.0}}
    assert out["grpo"]["winrate"]["ci"] == [0.5, 0.5]  # same scores, other texts: ties on every resample
    assert out["sft"]["winrate"]["ci"] == [0.5, 0.5]


def test_seeds_and_sft_share_the_resampled_items() -> None:
    rng = np.random.default_rng(0)
    sft = _mlperf([float(x) for x in rng.integers(0, 2, 60)])
    policy = _mlperf([float(x) for x in rng.integers(0, 2, 60)], prefix="p")
    out = _intervals(sft, {"one": {1: policy}, "twice": {1: policy, 2: policy}})
    # identical seeds resampled on the same items give the single seed's interval (independent draws would narrow it)
    assert out["twice"]["winrate"]["ci"] == out["one"]["winrate"]["ci"]
    assert out["twice"]["mlperf_em"]["ci"] == out["one"]["mlperf_em"]["ci"]


def test_race_f1_on_a_resample_comes_from_pooled_counts() -> None:
    # race_c: TP, FN; race_fortran: FP, TN. Pooled F1 = 2*1 / (2*1 + 1 + 1) = 0.5; the mean of per-item F1s would not
    # exist, and the per-language F1s (2/3 and 0) average to 1/3.
    sft = _race([("yes", 1.0), ("yes", 0.0)]) + _race([("no", 0.0), ("no", 1.0)], family="race_fortran")
    out = _intervals(sft, {}, resamples=3000)["sft"]
    assert out["race_f1"]["mean"] == 0.5
    lo, hi = out["race_f1"]["ci"]
    assert lo == 0.0 and hi == 1.0  # resamples of the TP alone reach 1, resamples without it 0
    assert out["accuracy_race_c"]["mean"] == 0.5 and out["accuracy_race_fortran"]["mean"] == 0.5


def test_unaligned_rows_and_bad_confidence_are_refused() -> None:
    sft = _mlperf([1.0, 0.0])
    with pytest.raises(ValueError, match="not aligned"):
        _intervals(sft, {"grpo": {1: list(reversed(sft))}})
    with pytest.raises(ValueError, match="has no runs"):
        _intervals(sft, {"grpo": {}})
    with pytest.raises(ValueError, match="confidence=95"):
        percentile_interval(np.zeros(3), 95)


def test_paired_differences_are_per_item_differences_on_shared_draws() -> None:
    n = 200
    sft = _mlperf([0.0] * n, "s")
    base = [1.0 if i % 2 else 0.0 for i in range(n)]
    one_more = base.copy()
    one_more[0] = 1.0  # the reference: right on one more item than "other", equal elsewhere
    groups = {"ref": {1: _mlperf(one_more, "r")}, "other": {1: _mlperf(base, "o")},
              "worse": {1: _mlperf([0.0] * n, "w")}}
    out = paired_differences(sft, groups, "ref", resamples=2000, confidence=0.95, seed=3)
    assert set(out) == {"other", "worse"}
    em = out["other"]["mlperf_em"]
    assert em["diff"] == pytest.approx(1 / n)
    # one item of difference: draws without item 0 (~37%) give 0, so the interval starts at 0 and never goes below
    assert em["ci"][0] == 0.0 and em["ci"][1] > 0 and not em["excludes_zero"]
    worse = out["worse"]["mlperf_em"]
    assert worse["diff"] == pytest.approx(101 / n) and worse["excludes_zero"] and worse["ci"][0] > 0.4
    assert out["other"]["race_f1"] is None  # no race items
    means = headline_intervals(sft, groups, resamples=200, confidence=0.95, seed=3)
    assert em["diff"] == pytest.approx(means["ref"]["mlperf_em"]["mean"] - means["other"]["mlperf_em"]["mean"])
    with pytest.raises(ValueError, match="reference 'hargo' is not among the methods"):
        paired_differences(sft, groups, "hargo", resamples=200, confidence=0.95, seed=3)
