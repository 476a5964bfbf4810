"""Tests of the LocalExecutor: batches, exclusive slots, dedupe, cache, async, infrastructure errors.

Run: pytest tests/bench/test_executor.py
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor, make_slots
from hpcrl_core.bench.result import Status
from hpcrl_core.bench.slots import CoreLocks
from hpcrl_core.errors import BenchInfraError, ConfigError
from tests.bench.test_adversarial import GOOD, SIG
from tests.helpers import own_machine_code

pytestmark = pytest.mark.integration


def _variant(i: int) -> str:
    return own_machine_code(GOOD, i)


def test_make_slots() -> None:
    assert make_slots([3, 1, 2, 0], 2) == [(0, 1), (2, 3)]
    assert make_slots([0, 1, 2], 2) == [(0, 1)]  # never half a slot
    with pytest.raises(ConfigError, match="cores_per_slot is 4"):
        make_slots([0, 1], 4)


def test_batch_results_in_order(engine: Engine) -> None:
    codes = [_variant(1), SIG + "{ C[0] = 1; }", "not code", _variant(2)]
    with LocalExecutor(engine) as ex:
        results = ex.map(codes)
    assert [r.status for r in results] == [Status.OK, Status.WRONG_RESULT, Status.FORMAT_VIOLATION, Status.OK]


def _slot_engine(tmp_path: Path) -> object:
    """A minimal engine stand-in for slot tasks: the executor only reads its params and holds its slots."""
    from hpcrl_core.config import BenchParams

    class _E:
        params = BenchParams()
        locks = CoreLocks(tmp_path / "locks")
    return _E()


def test_slots_are_exclusive(tmp_path: Path) -> None:
    # a fake engine is not needed: slot tasks show which cores each job owned and when
    spans: list[tuple[tuple[int, ...], float, float]] = []
    lock = threading.Lock()

    def job(slot: tuple[int, ...]) -> int:
        t0 = time.monotonic()
        time.sleep(0.05)
        with lock:
            spans.append((slot, t0, time.monotonic()))
        return 0

    cores = sorted(os.sched_getaffinity(0))
    ex = LocalExecutor(_slot_engine(tmp_path), cores=cores, cores_per_slot=1)  # type: ignore[arg-type]
    futures = [ex.submit_on_slot(job) for _ in range(8)]
    assert [f.result() for f in futures] == [0] * 8
    ex.close()
    for i, (slot_a, a0, a1) in enumerate(spans):
        for slot_b, b0, b1 in spans[i + 1:]:
            if set(slot_a) & set(slot_b):
                assert a1 <= b0 or b1 <= a0, "two jobs overlapped on one core"
    assert {s for s, _, _ in spans} == {(c,) for c in cores}  # every slot used


def test_the_count_is_kept_before_the_caller_wakes(tmp_path: Path) -> None:
    # a done-callback runs in the worker as the future resolves: it must already see the job counted, for a
    # result and for an error alike (a caller that reads ``completed`` right after ``result()`` relies on it)
    def broken(slot: tuple[int, ...]) -> int:
        raise BenchInfraError("compiler vanished")

    seen: list[int] = []
    with LocalExecutor(_slot_engine(tmp_path), cores=sorted(os.sched_getaffinity(0))[:1]) as ex:  # type: ignore[arg-type]
        for job in (lambda slot: 0, broken, lambda slot: 0):
            fut = ex.submit_on_slot(job)
            fut.add_done_callback(lambda f: seen.append(ex.completed))
            fut.exception()
    assert seen == [1, 2, 3]


def test_cache_hits_and_inflight_dedupe(engine: Engine, tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c.sqlite")
    code = _variant(3)
    with LocalExecutor(engine, cache) as ex:
        f1, f2 = ex.submit(code), ex.submit(code.replace("{", "{ ", 1))  # same normalised code
        assert f1 is f2
        first = f1.result()
        again = ex.submit(code).result()
    assert first.ok and not first.cached
    assert not first.disturbed, (first.foreign_load, first.extra)  # a disturbed figure is never cached
    assert again.cached and again.gflops == first.gflops and again.key == first.key
    assert cache.hits == 1


def test_async_submit(engine: Engine) -> None:
    async def go(ex: LocalExecutor) -> list[Status]:
        results = await asyncio.gather(ex.submit_async(_variant(4)), ex.submit_async("garbage"))
        return [r.status for r in results]

    with LocalExecutor(engine) as ex:
        assert asyncio.run(go(ex)) == [Status.OK, Status.FORMAT_VIOLATION]


def test_infrastructure_errors_reach_the_caller(engine: Engine) -> None:
    def broken(slot: tuple[int, ...]) -> None:
        raise BenchInfraError("compiler vanished")

    with LocalExecutor(engine) as ex:
        with pytest.raises(BenchInfraError, match="vanished"):
            ex.submit_on_slot(broken).result()
        assert ex.submit(_variant(5)).result().ok  # and the executor keeps working


def test_a_disturbed_figure_is_measured_again_and_the_one_nearest_full_speed_kept(tmp_path: Path) -> None:
    from hpcrl_core.bench.result import BenchResult
    from hpcrl_core.config import BenchParams
    from hpcrl_core.config.bench import TimingParams

    figures = iter([(10.0, 1.6, True), (12.0, 1.3, True), (11.0, 1.5, True), (99.0, 1.0, False)])

    class _E:  # an engine stand-in whose measurements come from the list above, one run per figure
        params = BenchParams(timing=TimingParams(fresh_runs=1))
        locks = CoreLocks(tmp_path / "locks")

        def key(self, code: str, n: int, cores_per_slot: int) -> str:
            return "k"

        def prepare(self, completion: str, n: int) -> _E:
            return self

        object_key = ""  # no machine code to share a figure by

        def build(self, slot: tuple[int, ...]) -> None:
            return None

        def run(self, slot: tuple[int, ...]) -> BenchResult:
            g, slowdown, disturbed = next(figures)
            return BenchResult(status=Status.OK, n=64, gflops=g, key="k", disturbed=disturbed,
                               extra={"host_slowdown": slowdown})

        def close(self) -> None:
            pass

    cache = ResultCache(tmp_path / "c.sqlite")
    with LocalExecutor(_E(), cache, cores=[0], cores_per_slot=1) as ex:  # type: ignore[arg-type]
        seen = [ex.submit(GOOD).result() for _ in range(4)]
    assert [r.gflops for r in seen] == [10.0, 12.0, 12.0, 12.0]  # 3 measurements, then the cached best
    assert [r.cached for r in seen] == [False, False, False, True]
    assert seen[-1].extra["measurements"] == 3 and seen[-1].disturbed


def test_a_best_of_figure_takes_its_runs_apart_and_keeps_the_highest(tmp_path: Path) -> None:
    # one slot: the reference's second run waits behind the job queued after it, as a kernel's fresh runs do
    order: list[str] = []
    figures = iter([25.6, 43.0, 41.0])

    def reference(slot: tuple[int, ...]) -> float:
        order.append("reference")
        return next(figures)

    with LocalExecutor(_slot_engine(tmp_path), cores=sorted(os.sched_getaffinity(0))[:1]) as ex:  # type: ignore[arg-type]
        gate = threading.Event()
        blocker = ex.submit_on_slot(lambda slot: gate.wait(5))  # holds the only slot while the rest is queued
        best = ex.submit_best_on_slot(reference, 3, key=lambda g: g)
        other = ex.submit_on_slot(lambda slot: order.append("other"))
        gate.set()
        assert blocker.result() and best.result() == 43.0 and other.result() is None
    assert order == ["reference", "other", "reference", "reference"]
    with pytest.raises(ValueError, match="runs=0"):
        LocalExecutor.submit_best_on_slot(ex, reference, 0, key=lambda g: g)
