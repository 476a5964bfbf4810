"""Issue 24's per-run targets (hpcrl_core/evaluation/targets.py), on hand-made reports at and around each bar.

Run: ``pytest tests/evaluation/test_targets.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from hpcrl_core.evaluation.targets import fast_bars_met, missed_bars


def _at_bars(rl_verified: float = 0.80) -> dict[str, Any]:
    """A report that meets every per-run bar exactly."""
    return {"sft": {"verified_rate": 0.80, "distinct_kernels": 20},
            "rl": {"verified_rate": rl_verified, "oracle_ratio": 0.85, "oracle_ratio_rich": 0.6, "best_vs_numpy": 0.8,
                   "distinct_kernels": 10, "headroom_closed": 0.5}}


def test_a_report_exactly_at_every_bar_meets_them() -> None:
    assert missed_bars(_at_bars()) == [] and missed_bars(_at_bars(0.75)) == []  # exactly 5 points lower is allowed


def test_verified_rate_more_than_five_points_below_sft_is_missed() -> None:
    assert missed_bars(_at_bars(0.749)) == ["verified 0.749 < SFT's 0.800 - 0.05"]


@pytest.mark.parametrize(("key", "low", "bar"), [("oracle_ratio", 0.84, 0.85), ("oracle_ratio_rich", 0.59, 0.6),
                                                  ("best_vs_numpy", 0.79, 0.8), ("oracle_ratio", None, 0.85)])
def test_each_figure_below_its_bar_or_absent_is_named(key: str, low: float | None, bar: float) -> None:
    r = _at_bars()
    r["rl"][key] = low
    assert missed_bars(r) == [f"{key} {low} < {bar}"]


def test_fewer_than_half_of_sfts_distinct_kernels_is_missed() -> None:
    r = _at_bars()
    r["rl"]["distinct_kernels"] = 9
    assert missed_bars(r) == ["distinct kernels 9 < half of SFT's 20"]


def test_a_report_without_the_yardstick_misses_every_figure_bar() -> None:
    r = {"sft": {"verified_rate": 0.8}, "rl": {"verified_rate": 0.8}}
    assert len(missed_bars(r)) == 4  # three figures and the distinct count


def test_fast_bars_need_both_the_best_kernel_and_the_rich_ratio() -> None:
    assert fast_bars_met({"best_vs_numpy": 0.8, "oracle_ratio_rich": 0.6})
    assert not fast_bars_met({"best_vs_numpy": 1.1, "oracle_ratio_rich": 0.59})
    assert not fast_bars_met({"best_vs_numpy": 0.79, "oracle_ratio_rich": 1.0})
    assert not fast_bars_met({"best_vs_numpy": 1.1})  # no rich problem judged: not met
