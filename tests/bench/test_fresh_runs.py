"""Tests of fresh runs: a figure is the best of ``timing.fresh_runs`` runs, apart in time, and a failure decides.

Run: pytest tests/bench/test_fresh_runs.py
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor, best_of
from hpcrl_core.bench.extract import extract_code
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.bench.slots import CoreLocks
from hpcrl_core.config import BenchParams, Settings
from tests.bench.test_adversarial import GOOD
from tests.conftest import fast_params


def _ok(gflops: float, disturbed: bool = False, slowdown: float = 1.0, run_s: float = 0.1) -> BenchResult:
    return BenchResult(Status.OK, n=64, gflops=gflops, disturbed=disturbed, run_s=run_s,
                       extra={"host_slowdown": slowdown})


def test_one_run_is_its_own_figure() -> None:
    r = _ok(3.0)
    assert best_of([r]) is r


def test_the_fastest_undisturbed_run_is_kept_and_every_run_recorded() -> None:
    got = best_of([_ok(10.0, run_s=0.2), _ok(12.5, run_s=0.3), _ok(40.0, disturbed=True)])
    assert got.gflops == 12.5 and not got.disturbed
    assert got.extra["fresh_runs"] == 3 and got.extra["gflops_runs"] == [10.0, 12.5, 40.0]
    assert got.run_s == pytest.approx(0.6)  # what the figure cost, not what its best run took


def test_all_disturbed_keeps_the_run_nearest_full_host_speed() -> None:
    got = best_of([_ok(20.0, True, slowdown=1.6), _ok(15.0, True, slowdown=1.2), _ok(30.0, True, slowdown=2.0)])
    assert got.gflops == 15.0 and got.disturbed


def test_a_failed_run_decides_whatever_the_others_measured() -> None:
    wrong = BenchResult(Status.WRONG_RESULT, detail="C differs at (3, 4)", n=64)
    got = best_of([_ok(50.0), wrong, BenchResult(Status.TIMEOUT, n=64)])
    assert got.status is Status.WRONG_RESULT and got.gflops is None and got.detail == wrong.detail


def test_best_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one run"):
        best_of([])


class _ScriptedEngine:
    """An engine stand-in whose runs return scripted figures per kernel and record the order they ran in."""

    def __init__(self, tmp: Path, fresh_runs: int, figures: dict[str, list[BenchResult]]) -> None:
        timing = BenchParams().short_timing.model_copy(update={"fresh_runs": fresh_runs})
        self.params = BenchParams(cache=True).model_copy(update={"timing": timing})
        self.locks = CoreLocks(tmp / "locks")
        self.figures = figures
        self.order: list[str] = []
        self._lock = threading.Lock()

    def key(self, code: str, n: int, cores_per_slot: int) -> str:
        return f"{code}@{n}"

    def run(self, completion: str, cores: tuple[int, ...], n: int | None = None) -> BenchResult:
        name = completion.split("/*")[1].split("*/")[0].strip()
        with self._lock:
            i = sum(1 for o in self.order if o == name)
            self.order.append(name)
        time.sleep(0.01)
        r = self.figures[name][i]
        return BenchResult(r.status, n=n or 0, gflops=r.gflops, disturbed=r.disturbed, run_s=r.run_s,
                           extra=dict(r.extra), key=self.key(extract_code(completion, 1 << 20).code or "", n or 0, 1))


def _kernel(name: str) -> str:
    return f"```c\n/* {name} */\nvoid dgemm(int n, const double *A, const double *B, double *C) {{ }}\n```"


def test_each_figure_is_the_best_of_its_runs_taken_apart_in_time(tmp_path: Path) -> None:
    eng = _ScriptedEngine(tmp_path, 2, {"a": [_ok(10.0), _ok(14.0)], "b": [_ok(30.0), _ok(21.0)],
                                        "c": [_ok(5.0, True, 1.5), _ok(4.0)]})
    cache = ResultCache(tmp_path / "c.sqlite")
    with LocalExecutor(eng, cache, cores=[0]) as ex:  # type: ignore[arg-type]
        got = ex.map([_kernel("a"), _kernel("b"), _kernel("c")])
    assert [r.gflops for r in got] == [14.0, 30.0, 4.0]  # c: its undisturbed run, though slower
    # one slot: each kernel's second run waits behind the kernels queued meanwhile, so no two runs of one kernel
    # are back to back while other work waits
    assert eng.order == ["a", "b", "c", "a", "b", "c"]
    assert ex.completed == 3
    # the cache holds the figure the caller got, so a later hit repeats it
    with LocalExecutor(eng, cache, cores=[0]) as ex:  # type: ignore[arg-type]
        again = ex.map([_kernel("a"), _kernel("b"), _kernel("c")])
    assert [r.gflops for r in again] == [14.0, 30.0, 4.0] and all(r.cached for r in again)
    assert len(eng.order) == 6


def test_a_kernel_that_fails_is_not_run_again(tmp_path: Path) -> None:
    eng = _ScriptedEngine(tmp_path, 3, {"bad": [BenchResult(Status.RUNTIME_ERROR, detail="SIGSEGV")],
                                        "late": [_ok(8.0), BenchResult(Status.WRONG_RESULT, detail="x")]})
    with LocalExecutor(eng, cores=[0]) as ex:  # type: ignore[arg-type]
        got = ex.map([_kernel("bad"), _kernel("late")])
    assert [r.status for r in got] == [Status.RUNTIME_ERROR, Status.WRONG_RESULT]
    assert eng.order == ["bad", "late", "late"]  # a wrong second run ends the kernel: no third


def test_closing_with_runs_still_due_finishes_them(tmp_path: Path) -> None:
    eng = _ScriptedEngine(tmp_path, 3, {k: [_ok(1.0 + i), _ok(2.0 + i), _ok(3.0 + i)] for i, k in
                                        enumerate("pqrs")})
    ex = LocalExecutor(eng, cores=[0, 1])  # type: ignore[arg-type]
    futs = [ex.submit(_kernel(k)) for k in "pqrs"]
    ex.close()  # runs still queued or due are taken before the workers stop: no future is left waiting
    assert [f.result(timeout=5).gflops for f in futs] == [3.0, 4.0, 5.0, 6.0]
    assert len(eng.order) == 12


@pytest.mark.integration
def test_real_runs_record_every_figure(bench_dirs: Settings) -> None:
    params = fast_params(timing={**fast_params().timing.model_dump(), "fresh_runs": 2})
    with LocalExecutor(Engine(params, bench_dirs)) as ex:
        r = ex.submit(GOOD).result()
    assert r.ok and r.extra["fresh_runs"] == 2 and len(r.extra["gflops_runs"]) == 2
    assert r.gflops == max(r.extra["gflops_runs"])
