"""Tests of the reward ladder. Run: pytest tests/rewards/test_ladder.py"""

from __future__ import annotations

import math

import pytest

from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import RewardParams
from hpcrl_core.errors import ConfigError
from hpcrl_core.rewards.ladder import shape_reward

LADDER = {Status.FORMAT_VIOLATION: -100, Status.COMPILE_ERROR: -40, Status.TIMEOUT: -30,
          Status.RUNTIME_ERROR: -20, Status.WRONG_RESULT: -10}


@pytest.mark.parametrize("status", list(LADDER))
def test_failure_classes_get_the_papers_penalties(status: Status) -> None:
    assert shape_reward(BenchResult(status=status), RewardParams()) == LADDER[status]


def test_penalties_come_from_params() -> None:
    p = RewardParams(compile_error=-7.5)
    assert shape_reward(BenchResult(status=Status.COMPILE_ERROR), p) == -7.5


def test_correct_kernel_modes() -> None:
    ok = BenchResult(status=Status.OK, gflops=30.0)
    assert shape_reward(ok, RewardParams(mode="gflops", scale=1.0)) == 30.0
    assert shape_reward(ok, RewardParams(mode="relative", scale=10.0), reference_gflops=60.0) == 5.0
    assert shape_reward(ok, RewardParams(mode="log_speedup", scale=2.0), 15.0) == pytest.approx(2 * math.log(2))


def test_correct_always_beats_every_failure_in_relative_mode() -> None:
    slow = BenchResult(status=Status.OK, gflops=0.01)
    assert shape_reward(slow, RewardParams(), reference_gflops=100.0) > max(LADDER.values())


def test_relative_mode_without_reference_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="reference"):
        shape_reward(BenchResult(status=Status.OK, gflops=1.0), RewardParams(mode="relative"), None)
