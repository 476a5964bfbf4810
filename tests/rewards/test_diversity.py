"""Tests of duplicate sharing (hpcrl_core/rewards/diversity.py) and its use in the dgemm_gflops reward.

Run: pytest tests/rewards/test_diversity.py
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import pytest

from hpcrl_core.bench.extract import kernel_identity
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Params, parse_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.rewards import RewardContext
from hpcrl_core.rewards.dgemm import DgemmGflopsReward
from hpcrl_core.rewards.diversity import share_duplicates
from tests.rewards.test_dgemm_reward import NAIVE, OMP, FixedExecutor

# the same kernel as NAIVE for the engine's cache and for sharing: a comment and another layout
NAIVE_COMMENTED = NAIVE.replace("```c\n", "```c\n// plan: naive\n").replace("s += A", "s  +=  A")
NAIVE_OTHER = NAIVE.replace("double s = 0.0;", "double s = 0.0, t = 1.0;")


def _advantages(rewards: Sequence[float]) -> list[float]:
    mean = statistics.fmean(rewards)
    return [r - mean for r in rewards]


def test_a_kernel_written_once_keeps_its_reward() -> None:
    assert share_duplicates(["a", "b", "c", "d"], [1.0, 2.0, -10.0, 50.0], 4, 10.0) == [1.0, 2.0, -10.0, 50.0]


def test_a_collapsed_group_loses_the_penalty_and_keeps_zero_advantages() -> None:
    shared = share_duplicates(["a"] * 8, [40.0] * 8, 8, 10.0)
    assert shared == [30.0] * 8
    assert _advantages(shared) == [0.0] * 8


def test_copies_pay_in_proportion_to_how_many_others_wrote_them() -> None:
    # G = 4: a three times, b once; each copy of a pays 10 * (3 - 1) / 3
    shared = share_duplicates(["a", "b", "a", "a"], [40.0, 40.0, 40.0, 40.0], 4, 10.0)
    assert shared == pytest.approx([40 - 20 / 3, 40.0, 40 - 20 / 3, 40 - 20 / 3])
    # equal speed, so the single kernel now has the positive advantage
    adv = _advantages(shared)
    assert adv[1] > 0 and all(a < 0 for i, a in enumerate(adv) if i != 1)


def test_groups_are_consecutive_blocks_of_G() -> None:
    # the same kernel in two groups is not a copy across them
    assert share_duplicates(["a", "b", "a", "c"], [1.0] * 4, 2, 6.0) == [1.0, 1.0, 1.0, 1.0]
    assert share_duplicates(["a", "a", "a", "c"], [1.0] * 4, 2, 6.0) == [-5.0, -5.0, 1.0, 1.0]


def test_total_deduction_matches_an_independent_count() -> None:
    rng = random.Random(7)
    for _ in range(200):
        g = rng.randint(2, 9)
        groups = rng.randint(1, 4)
        keys = [rng.choice("abc") for _ in range(g * groups)]
        rewards = [rng.uniform(-100, 100) for _ in keys]
        shared = share_duplicates(keys, rewards, g, 7.5)
        for start in range(0, len(keys), g):
            block = keys[start:start + g]
            # every ordered pair (i, j), i != j, of copies within the block costs 7.5 / (g - 1)
            pairs = sum(1 for i in range(g) for j in range(g) if i != j and block[i] == block[j])
            paid = sum(r - s for r, s in zip(rewards[start:start + g], shared[start:start + g], strict=True))
            assert paid == pytest.approx(7.5 * pairs / (g - 1))


def test_no_penalty_is_the_identity() -> None:
    assert share_duplicates(["a", "a"], [3.0, 4.0], 2, 0.0) == [3.0, 4.0]


@pytest.mark.parametrize(("keys", "rewards", "g", "penalty", "match"), [
    (["a", "b"], [1.0], 2, 1.0, "one key per reward"),
    (["a", "b", "c"], [1.0, 1.0, 1.0], 2, 1.0, "whole groups"),
    (["a", "b"], [1.0, 1.0], 1, 1.0, "whole groups"),
    (["a", "b"], [1.0, 1.0], 2, -1.0, "must be >= 0"),
])
def test_bad_input_is_a_config_error(keys: list[str], rewards: list[float], g: int, penalty: float,
                                     match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        share_duplicates(keys, rewards, g, penalty)


def test_identity_ignores_comments_and_layout_but_not_code() -> None:
    assert kernel_identity(NAIVE_COMMENTED) == kernel_identity(NAIVE)
    assert kernel_identity(NAIVE_OTHER) != kernel_identity(NAIVE)
    assert kernel_identity("no code here") == "no code here"


def _params(penalty: float, keep_order: bool = False) -> Params:
    return parse_params({"reward": {"mode": "gflops", "scale": 1.0, "duplicate_penalty": penalty,
                                    "duplicate_keeps_order": keep_order}})


def test_the_reward_hands_trl_shared_rewards_and_the_observer_unshared_ones() -> None:
    seen: list[list[float]] = []
    metrics: dict[str, float] = {}

    def observe(texts: Sequence[str], results: Sequence[BenchResult], rewards: Sequence[float],
                columns: dict[str, Sequence[Any]]) -> None:
        seen.append(list(rewards))

    fn = DgemmGflopsReward(RewardContext(_params(9.0), FixedExecutor(), observer=observe, group_size=4))
    completions = [NAIVE, NAIVE_COMMENTED, NAIVE_OTHER, OMP]
    rewards = fn(completions=completions, permitted=[[], [], [], ["openmp"]], n=[64] * 4,
                 problem_id=["p"] * 4, log_metric=metrics.__setitem__)
    assert seen == [[12.0] * 4], "the curriculum and archive see the speed reward"
    assert rewards == pytest.approx([12.0 - 3.0, 12.0 - 3.0, 12.0, 12.0])
    assert metrics["reward/duplicate_penalty_mean"] == pytest.approx(1.5)


def test_without_a_penalty_the_reward_is_unchanged_and_logs_no_deduction() -> None:
    metrics: dict[str, float] = {}
    fn = DgemmGflopsReward(RewardContext(_params(0.0), FixedExecutor()))
    assert fn(completions=[NAIVE, NAIVE], permitted=[[], []], n=[64, 64], log_metric=metrics.__setitem__) == [12.0,
                                                                                                              12.0]
    assert "reward/duplicate_penalty_mean" not in metrics


def test_a_batch_of_partial_groups_is_refused_when_sharing() -> None:
    fn = DgemmGflopsReward(RewardContext(_params(5.0), FixedExecutor(), group_size=2))
    with pytest.raises(ConfigError, match="whole groups"):
        fn(completions=[NAIVE, NAIVE, OMP], permitted=[[], [], ["openmp"]], n=[64] * 3)


def test_sharing_without_a_group_size_is_a_config_error() -> None:
    fn = DgemmGflopsReward(RewardContext(_params(5.0), FixedExecutor()))
    with pytest.raises(ConfigError, match="no group_size"):
        fn(completions=[NAIVE, NAIVE], permitted=[[], []], n=[64] * 2)


@pytest.mark.parametrize("bad", [-1.0, float("inf"), float("nan")])
def test_params_refuse_a_negative_or_infinite_penalty(bad: float) -> None:
    with pytest.raises(ConfigError, match="duplicate_penalty"):
        parse_params({"reward": {"duplicate_penalty": bad}})


def test_keeping_order_levels_a_fast_mode_with_a_slower_kernel_instead_of_reversing_them() -> None:
    # G = 8: a fast kernel seven times (100), a slower one once (95); λ 30 puts each copy at 100 - 30 * 6 / 7
    keys, rewards = ["a"] * 7 + ["b"], [100.0] * 7 + [95.0]
    plain = share_duplicates(keys, rewards, 8, 30.0)
    assert plain[0] == pytest.approx(100 - 180 / 7) and plain[7] == 95.0  # reversed: the slower kernel is paid more
    kept = share_duplicates(keys, rewards, 8, 30.0, keep_order=True)
    assert kept == [95.0] * 8, "levelled, not reversed: no advantage pushes towards the slower kernel"
    # where no copy falls below a slower kernel, keeping order changes nothing
    small = share_duplicates(["a", "a", "b", "c"], [100.0, 100.0, 50.0, -40.0], 4, 10.0)
    assert share_duplicates(["a", "a", "b", "c"], [100.0, 100.0, 50.0, -40.0], 4, 10.0, keep_order=True) == small


def test_kept_order_holds_for_random_groups_and_only_ever_raises() -> None:
    rng = random.Random(11)
    for _ in range(300):
        g = rng.randint(2, 9)
        keys = [rng.choice("abcd") for _ in range(2 * g)]
        rewards = [float(rng.choice([-40, -10, 20, 50, 52, 100])) + rng.choice([0.0, 0.5]) for _ in keys]
        penalty = rng.uniform(0, 60)
        plain = share_duplicates(keys, rewards, g, penalty)
        kept = share_duplicates(keys, rewards, g, penalty, keep_order=True)
        for start in range(0, len(keys), g):
            block = range(start, start + g)
            best = {keys[i]: max(rewards[j] for j in block if keys[j] == keys[i]) for i in block}
            for i in block:
                assert plain[i] <= kept[i] and (kept[i] == plain[i] or kept[i] < best[keys[i]])
                for j in block:
                    if best[keys[i]] > best[keys[j]]:
                        assert kept[i] >= kept[j]


def test_copies_timed_apart_move_together() -> None:
    # a written three times, timed 100, 100 and 98 (copies differing in comments are timed apart); b once at 99
    kept = share_duplicates(["a", "a", "a", "b"], [100.0, 100.0, 98.0, 99.0], 4, 30.0, keep_order=True)
    assert kept[:3] == [99.0, 99.0, 99.0], "every copy of a is raised to b's level, the slow copy too"
    assert kept[3] == 99.0


class SpeedByCode:
    """NAIVE-like kernels at 12 GFLOPS, the OpenMP kernel at 11."""

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        fut: Future[BenchResult] = Future()
        fut.set_result(BenchResult(Status.OK, n=n or 0, gflops=11.0 if "omp" in str(completion) else 12.0))
        return fut


def test_the_reward_keeps_order_when_the_params_say_so() -> None:
    completions = [NAIVE, NAIVE_COMMENTED, NAIVE, OMP]  # the naive kernel three times (12), the OpenMP one once (11)
    args = {"completions": completions, "permitted": [[], [], [], ["openmp"]], "n": [64] * 4}
    plain = DgemmGflopsReward(RewardContext(_params(6.0), SpeedByCode(), group_size=4))(**args)
    assert plain == pytest.approx([8.0, 8.0, 8.0, 11.0])
    kept = DgemmGflopsReward(RewardContext(_params(6.0, keep_order=True), SpeedByCode(), group_size=4))(**args)
    assert kept == pytest.approx([11.0] * 4)
