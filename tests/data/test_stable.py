"""Tests of name-keyed choices: fixed by their inputs, uniform, and weighted as documented.

Run: pytest tests/data/test_stable.py
"""

from __future__ import annotations

import math
from collections import Counter

import pytest

from hpcrl_core.data.stable import stable_index, stable_unit, weighted_key


def test_stable_unit_is_fixed_by_its_parts_and_lies_in_the_open_unit_interval() -> None:
    values = [stable_unit("s", 7, f"name{i}") for i in range(5000)]
    assert values == [stable_unit("s", 7, f"name{i}") for i in range(5000)]
    assert all(0.0 < v < 1.0 for v in values)
    assert stable_unit("a", "bc") != stable_unit("ab", "c")  # parts are separated, not concatenated
    deciles = Counter(int(v * 10) for v in values)
    assert all(400 <= deciles[d] <= 600 for d in range(10)), deciles  # uniform: 500 each, 4.5 sd slack


def test_weighted_key_picks_in_proportion_to_weight() -> None:
    weights = {"a": 1.0, "b": 2.0, "c": 5.0}
    wins = Counter(max(weights, key=lambda k: weighted_key(weights[k], "draw", i, k)) for i in range(8000))
    for name, w in weights.items():
        share = wins[name] / 8000
        assert math.isclose(share, w / 8.0, abs_tol=0.025), (name, share)


def test_a_small_weight_change_rarely_changes_the_winner() -> None:
    names = [f"k{i}" for i in range(20)]
    weights = {n: 1.0 + i for i, n in enumerate(names)}
    nudged = {n: w * (1.05 if i % 2 else 0.95) for i, (n, w) in enumerate(weights.items())}
    same = sum(max(names, key=lambda n: weighted_key(weights[n], d, n))
               == max(names, key=lambda n: weighted_key(nudged[n], d, n)) for d in range(2000))
    assert same / 2000 > 0.9


@pytest.mark.parametrize("weight", [0.0, -1.0, math.nan, math.inf])
def test_weighted_key_rejects_weights_that_are_not_positive_and_finite(weight: float) -> None:
    with pytest.raises(ValueError, match="positive finite"):
        weighted_key(weight, "x")


def test_stable_index_is_uniform_over_the_range_and_fixed_by_its_parts() -> None:
    picks = Counter(stable_index(3, "x", i) for i in range(6000))
    assert set(picks) == {0, 1, 2} and all(abs(c / 6000 - 1 / 3) < 0.03 for c in picks.values())
    assert stable_index(7, "a", 1) == stable_index(7, "a", 1) == min(int(stable_unit("a", 1) * 7), 6)
    assert stable_index(1, "anything") == 0
    with pytest.raises(ValueError, match="at least 1"):
        stable_index(0, "x")
