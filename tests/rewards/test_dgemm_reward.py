"""Tests of the dgemm_gflops reward with the real engine (gcc, sandbox) at n=64.

Run: pytest tests/rewards/test_dgemm_reward.py
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.reference import ReferenceTracker
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Params, parse_params
from hpcrl_core.errors import BenchInfraError, ConfigError, DataError
from hpcrl_core.rewards import RewardContext, get_reward
from hpcrl_core.rewards.dgemm import BatchStats, DgemmGflopsReward
from tests.helpers import own_machine_code, size_guard

SIG = "void dgemm(int n, const double *A, const double *B, double *C)"
LOOPS = """
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double s = 0.0;
      for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
      C[i*n + j] = s;
    }
}"""
NAIVE = f"```c\n{SIG} {{{LOOPS}\n```"
OMP = f"```c\n{SIG} {{\n#pragma omp parallel for{LOOPS}\n```"
WRONG = f"```c\n{SIG} {{ C[0] = 1.0; }}\n```"
BROKEN = f"```c\n{SIG} {{ C[0] = ; }}\n```"
N = 64
LADDER = {"format_violation": -100.0, "compile_error": -40.0, "timeout": -30.0, "runtime_error": -20.0,
          "wrong_result": -10.0}


def _params(**reward: Any) -> Params:
    # the reward before duplicate sharing (which needs GRPO's groups; tests/rewards/test_diversity.py)
    return parse_params({"reward": {"mode": "gflops", "scale": 1.0, "duplicate_penalty": 0.0, **reward}})


def _n(count: int) -> list[int]:
    """The ``n`` column of a batch of ``count`` completions whose prompts ask for n = 64."""
    return [N] * count


def _variant(i: int) -> str:
    """A correct kernel no other test benchmarks (so no cache entry exists for it), its own machine code per i."""
    return own_machine_code(NAIVE, i)


@pytest.fixture(scope="module")
def executor(engine: Engine, cores: tuple[int, ...], tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[LocalExecutor]:
    cache = ResultCache(Path(tmp_path_factory.mktemp("dgemm-reward")) / "results.sqlite")
    with LocalExecutor(engine, cache, cores=cores, cores_per_slot=1) as ex:
        yield ex


class Recorder:
    """Collects what the reward hands the observer and log_metric."""

    def __init__(self) -> None:
        self.batches: list[tuple[list[str], list[BenchResult], list[float], dict[str, Any]]] = []
        self.metrics: dict[str, float] = {}

    def observe(self, texts: Sequence[str], results: Sequence[BenchResult], rewards: Sequence[float],
                columns: dict[str, Sequence[Any]]) -> None:
        self.batches.append((list(texts), list(results), list(rewards), dict(columns)))


@pytest.fixture(scope="module")
def scored(executor: LocalExecutor) -> tuple[list[float], Recorder, DgemmGflopsReward]:
    """One batch through the registry: every ladder rung we can provoke cheaply, plus OMP twice."""
    rec = Recorder()
    fn = get_reward("dgemm_gflops")(RewardContext(_params(), executor, observer=rec.observe))
    assert isinstance(fn, DgemmGflopsReward)
    completions = [NAIVE, WRONG, BROKEN, OMP, [{"role": "assistant", "content": OMP}], "no code here"]
    permitted: list[list[str]] = [[], [], [], [], ["openmp"], ["simd"]]
    rewards = fn(prompts=["p"] * 6, completions=completions, permitted=permitted, n=_n(6),
                 log_metric=rec.metrics.__setitem__, problem_id=[f"p{i}" for i in range(6)])
    return rewards, rec, fn


@pytest.mark.integration
def test_rewards_follow_the_ladder(scored: tuple[list[float], Recorder, DgemmGflopsReward]) -> None:
    rewards, _, _ = scored
    naive, wrong, broken, omp_forbidden, omp_permitted, no_code = rewards
    assert naive > 0 and naive >= max(LADDER.values())
    assert wrong == LADDER["wrong_result"]
    assert broken == LADDER["compile_error"]
    assert omp_forbidden == LADDER["format_violation"], "openmp used where the problem permits none"
    assert omp_permitted > 0, "the same kernel is fine where openmp is permitted"
    assert no_code == LADDER["format_violation"]


@pytest.mark.integration
def test_observer_gets_aligned_results(scored: tuple[list[float], Recorder, DgemmGflopsReward]) -> None:
    rewards, rec, _ = scored
    [(texts, results, seen_rewards, columns)] = rec.batches
    assert texts[4] == texts[3] == OMP  # the conversational completion arrives as its text
    assert seen_rewards == rewards
    assert [r.status for r in results] == [Status.OK, Status.WRONG_RESULT, Status.COMPILE_ERROR, Status.OK,
                                           Status.OK, Status.FORMAT_VIOLATION]
    assert results[3].techniques == ("openmp",)
    assert columns["problem_id"] == [f"p{i}" for i in range(6)] and len(columns["permitted"]) == 6
    assert columns["n"] == _n(6) and all(r.n == N for r in results)
    assert "prompts" not in columns


@pytest.mark.integration
def test_components_are_logged(scored: tuple[list[float], Recorder, DgemmGflopsReward]) -> None:
    _, rec, fn = scored
    m = rec.metrics
    assert {f"reward/status/{s.value}" for s in Status} | {"reward/status/technique_violation"} <= set(m)
    assert m["reward/status/ok"] == pytest.approx(2 / 6)
    assert m["reward/status/technique_violation"] == pytest.approx(1 / 6)
    assert m["reward/status/format_violation"] == pytest.approx(1 / 6)
    assert sum(v for k, v in m.items() if k.startswith("reward/status/")) == pytest.approx(1.0)
    assert 0 < m["reward/gflops_median"] <= m["reward/gflops_max"]
    assert m["reward/bench_s"] > 0 and "reward/reference_gflops" not in m  # mode gflops: no reference
    assert m["reward/runs"] == 5  # OMP once, although two completions hold it
    assert fn.last_stats is not None and fn.last_stats.metrics() == m


@pytest.mark.integration
def test_duplicates_are_benchmarked_once_and_then_cached(executor: LocalExecutor) -> None:
    fn = get_reward("dgemm_gflops")(RewardContext(_params(), executor))
    assert isinstance(fn, DgemmGflopsReward)
    kernel = _variant(11)
    before = executor.completed
    first = fn(completions=[kernel] * 4, permitted=[[]] * 4, n=_n(4))
    assert executor.completed - before == 1
    assert len(set(first)) == 1 and first[0] > 0
    assert fn.last_stats is not None and fn.last_stats.runs == 1 and fn.last_stats.cache_hits == 0
    again = fn(completions=[kernel] * 2, permitted=[[]] * 2, n=_n(2))
    assert executor.completed - before == 1, "a finished kernel is answered from the cache"
    assert again == first[:2] and fn.last_stats.cache_hits == 2 and fn.last_stats.runs == 0


@pytest.mark.integration
def test_relative_mode_divides_by_the_reference(executor: LocalExecutor) -> None:
    params = _params(mode="relative", reference="naive", scale=10.0)
    rec = Recorder()
    ref = ReferenceTracker(executor, "naive", params.reward.reference_ttl_s)
    fn = get_reward("dgemm_gflops")(RewardContext(params, executor, ref, rec.observe))
    [reward] = fn(completions=[_variant(12)], permitted=[[]], n=_n(1), log_metric=rec.metrics.__setitem__)
    [(_, [result], _, _)] = rec.batches
    assert result.ok and result.gflops
    assert reward == pytest.approx(10.0 * result.gflops / rec.metrics["reward/reference_gflops"])


class FakeExecutor:
    """Stands in for a backend whose machinery breaks: at submit, or later on the future (as LocalExecutor does)."""

    def __init__(self, at_submit: bool) -> None:
        self.at_submit = at_submit
        self.submitted = 0

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        self.submitted += 1
        if self.at_submit:
            raise BenchInfraError("result cache not usable")
        fut: Future[BenchResult] = Future()
        fut.set_exception(BenchInfraError("the sandbox failed to start the benchmark"))
        return fut


class FakeReference:
    kind = "numpy"

    def gflops(self, n: int) -> float:
        raise BenchInfraError("numpy reference failed")


@pytest.mark.parametrize("at_submit", [True, False])
def test_infrastructure_faults_propagate(at_submit: bool) -> None:
    rec = Recorder()
    fn = DgemmGflopsReward(RewardContext(_params(), FakeExecutor(at_submit), observer=rec.observe))
    with pytest.raises(BenchInfraError):
        fn(completions=[NAIVE, WRONG], permitted=[[], []], n=_n(2))
    assert not rec.batches and fn.last_stats is None, "no reward may come out of a broken benchmark"


def test_reference_faults_propagate() -> None:
    fn = DgemmGflopsReward(RewardContext(_params(mode="relative"), FakeExecutor(False), FakeReference()))
    with pytest.raises(BenchInfraError, match="numpy"):
        fn(completions=[NAIVE], permitted=[[]], n=_n(1))


def test_permitted_column_is_required_and_checked() -> None:
    ex = FakeExecutor(False)
    fn = DgemmGflopsReward(RewardContext(_params(), ex))
    with pytest.raises(ConfigError, match="needs the dataset column 'permitted'"):
        fn(completions=[NAIVE], problem_id=["p0"], n=_n(1))
    with pytest.raises(ConfigError, match="one entry per completion; got 1 entries for 2"):
        fn(completions=[NAIVE, NAIVE], permitted=[[]], n=_n(2))
    with pytest.raises(DataError, match="unknown technique 'omp'"):
        fn(completions=[NAIVE], permitted=[["omp"]], n=_n(1))
    with pytest.raises(DataError, match="list of technique names"):
        fn(completions=[NAIVE], permitted=["openmp"], n=_n(1))
    assert ex.submitted == 0, "a malformed batch must fail before anything is benchmarked"


def test_n_column_is_required_and_checked() -> None:
    ex = FakeExecutor(False)
    fn = DgemmGflopsReward(RewardContext(_params(), ex))
    with pytest.raises(ConfigError, match="needs the dataset column 'n'"):
        fn(completions=[NAIVE], permitted=[[]])
    with pytest.raises(ConfigError, match="one size per completion; got 1 entries for 2"):
        fn(completions=[NAIVE, NAIVE], permitted=[[], []], n=[64])
    with pytest.raises(ConfigError, match="got a string"):
        fn(completions=[NAIVE], permitted=[[]], n="64")
    for bad in (0, -3, 64.5, "64", None, True):
        with pytest.raises(DataError, match=r"n\[0\] is .* a matrix size"):
            fn(completions=[NAIVE], permitted=[[]], n=[bad])
    assert ex.submitted == 0, "a malformed batch must fail before anything is benchmarked"


@pytest.mark.integration
def test_each_kernel_is_timed_at_the_size_its_prompt_asks_for(executor: LocalExecutor) -> None:
    rec = Recorder()
    fn = DgemmGflopsReward(RewardContext(_params(), executor, observer=rec.observe))
    kernel = _variant(13)
    before = executor.completed
    rewards = fn(completions=[kernel, kernel, kernel], permitted=[[], [], []], n=[48, 80, 48])
    [(_, results, _, columns)] = rec.batches
    assert [r.n for r in results] == [48, 80, 48] and columns["n"] == [48, 80, 48]
    assert executor.completed - before == 2, "one run per distinct (kernel, size)"
    assert rewards[0] == rewards[2] and all(r > 0 for r in rewards)


class SizedReference:
    """numpy's figure grows with the size here: 10 GFLOPS per 32 of n."""

    kind = "numpy"

    def __init__(self) -> None:
        self.asked: list[int] = []

    def gflops(self, n: int) -> float:
        self.asked.append(n)
        return 10.0 * n / 32


class FixedExecutor:
    """Every kernel verified at 12 GFLOPS, at the size it was submitted with."""

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        fut: Future[BenchResult] = Future()
        fut.set_result(BenchResult(Status.OK, n=n or 0, gflops=12.0))
        return fut


def test_relative_rewards_divide_by_the_reference_at_each_kernels_size() -> None:
    ref = SizedReference()
    metrics: dict[str, float] = {}
    fn = DgemmGflopsReward(RewardContext(_params(mode="relative", scale=10.0), FixedExecutor(), ref))
    small, large, small_again = fn(completions=[NAIVE, OMP, WRONG], permitted=[[], ["openmp"], []], n=[32, 96, 32],
                                   log_metric=metrics.__setitem__)
    assert sorted(ref.asked) == [32, 96], "one reference figure per size in the batch"
    assert small == pytest.approx(10.0 * 12 / 10) and large == pytest.approx(10.0 * 12 / 30)
    assert small_again == small
    assert metrics["reward/reference_gflops"] == pytest.approx(10.0)  # logged: the median over the completions


def test_relative_mode_needs_a_matching_reference() -> None:
    with pytest.raises(ConfigError, match="needs a reference"):
        DgemmGflopsReward(RewardContext(_params(mode="relative"), FakeExecutor(False)))
    with pytest.raises(ConfigError, match="reward.reference is 'naive'"):
        DgemmGflopsReward(RewardContext(_params(mode="relative", reference="naive"), FakeExecutor(False),
                                        FakeReference()))


def test_building_without_an_executor_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="dgemm_gflops benchmarks every kernel but .* no executor"):
        get_reward("dgemm_gflops")(RewardContext(_params()))


def test_stats_without_verified_kernels_log_zero_gflops() -> None:
    m = BatchStats(("compile_error", "technique_violation"), (), 0, 2, 0.5, None).metrics()
    assert m["reward/gflops_mean"] == m["reward/gflops_max"] == m["reward/gflops_median"] == 0.0
    assert m["reward/status/compile_error"] == 0.5 and all(math.isfinite(v) for v in m.values())


def test_stats_count_disturbed_figures() -> None:
    m = BatchStats(("ok", "ok", "compile_error", "ok"), (10.0, 11.0, 12.0), 0, 3, 0.5, None, disturbed=1).metrics()
    assert m["reward/disturbed_share"] == 0.25
    assert BatchStats(("ok",), (1.0,), 0, 1, 0.1, None).metrics()["reward/disturbed_share"] == 0.0


class TwoNodeExecutor:
    """Results as the agents backend returns them from two CPUs: the same 12 GFLOPS, timed on a node whose numpy
    reaches 24 (the first kernel) and on one whose numpy reaches 12 (the second)."""

    node_reference = "numpy"

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        slow_node = size_guard(1) in str(completion)  # _variant(1)
        fut: Future[BenchResult] = Future()
        fut.set_result(BenchResult(Status.OK, n=n or 64, gflops=12.0, extra={
            "agent": "b" if slow_node else "a", "node_reference": "numpy",
            "node_reference_gflops": 12.0 if slow_node else 24.0}))
        return fut


def test_relative_rewards_use_the_reference_of_the_node_that_timed_each_kernel() -> None:
    rec = Recorder()
    fn = DgemmGflopsReward(RewardContext(_params(mode="relative", scale=10.0), TwoNodeExecutor(),
                                         observer=rec.observe))  # no tracker: each result carries its node's figure
    fast_node, slow_node = fn(completions=[_variant(0), _variant(1)], permitted=[[], []], n=_n(2),
                              log_metric=rec.metrics.__setitem__)
    assert (fast_node, slow_node) == (pytest.approx(5.0), pytest.approx(10.0))  # 12/24 and 12/12 of the scale
    assert rec.metrics["reward/reference_gflops"] == pytest.approx(18.0)  # logged: the median of the two


def test_a_backend_without_node_references_still_needs_a_tracker() -> None:
    with pytest.raises(ConfigError, match="needs a reference figure"):
        DgemmGflopsReward(RewardContext(_params(mode="relative"), FakeExecutor(False)))
