"""Tests of fresh runs: a figure is the best of ``timing.fresh_runs`` runs, apart in time, and a failure decides.

Run: pytest tests/bench/test_fresh_runs.py
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import SPACING_PER_SLOT, LocalExecutor, best_of
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

    def prepare(self, completion: str, n: int | None = None) -> _ScriptedKernel:
        return _ScriptedKernel(self, completion, n)


class _ScriptedKernel:
    """The stand-in's ``Engine.prepare``: each run is a scripted one; the executor must close it when done."""

    def __init__(self, engine: _ScriptedEngine, completion: str, n: int | None) -> None:
        self.engine, self.completion, self.n, self.closed = engine, completion, n, False

    object_key = ""  # no machine code to share a figure by (``test_same_object.py`` scripts one)

    def build(self, cores: tuple[int, ...]) -> BenchResult | None:
        assert not self.closed
        return None

    @property
    def base(self) -> dict:
        return {"key": self.engine.key(extract_code(self.completion, 1 << 20).code or "", self.n or 0, 1)}

    def run(self, cores: tuple[int, ...]) -> BenchResult:
        assert not self.closed
        return self.engine.run(self.completion, cores, self.n)

    def close(self) -> None:
        self.closed = True


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


def test_in_a_long_batch_a_second_run_waits_behind_a_bounded_amount_of_work(tmp_path: Path) -> None:
    names = [f"k{i:02d}" for i in range(3 * SPACING_PER_SLOT)]
    eng = _ScriptedEngine(tmp_path, 2, {k: [_ok(1.0), _ok(2.0)] for k in names})
    done: list[int] = []
    with LocalExecutor(eng, cores=[0]) as ex:  # type: ignore[arg-type]
        futs = [ex.submit(_kernel(k)) for k in names]
        for f in futs:
            f.add_done_callback(lambda _: done.append(len(eng.order)))
        assert [f.result(timeout=10).gflops for f in futs] == [2.0] * len(names)
    first, second = {}, {}
    for i, k in enumerate(eng.order):
        (second if k in first else first)[k] = i
    gaps = [second[k] - first[k] - 1 for k in names]
    # every job waited behind other work between its runs, never more than the bound (one slot here)
    assert min(gaps) >= 1 and max(gaps) <= SPACING_PER_SLOT
    # so results come while the batch goes: the first job finished before a third of the runs were taken
    assert done[0] <= len(eng.order) // 3


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
    # the fastest, unless the host disturbed it (then an undisturbed slower one is the figure)
    assert r.gflops == max(r.extra["gflops_runs"]) or (r.gflops in r.extra["gflops_runs"] and not r.disturbed)


def _count_compiles(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import hpcrl_core.bench.engine as engine_module
    calls: list[int] = []
    real = engine_module.compile_kernel

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(engine_module, "compile_kernel", counted)
    return calls


def _jobs(engine: Engine) -> list[Path]:
    return sorted(engine.scratch.glob("job-*"))


@pytest.fixture
def own(bench_dirs: Settings) -> Iterator[Engine]:
    """An engine whose scratch folder no other test's job uses (the tests count the folders in it)."""
    scratch = Path(tempfile.mkdtemp(prefix="hpcrl-fresh-"))
    os.chmod(scratch, 0o755)
    yield Engine(fast_params(), Settings(cache_dir=bench_dirs.cache_dir, scratch_dir=scratch))
    shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.integration
def test_a_kernels_fresh_runs_time_one_build(own: Engine, cores: tuple[int, ...],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    engine = own
    compiles = _count_compiles(monkeypatch)
    before = _jobs(engine)
    with engine.prepare(GOOD + "\n/* one build */\n") as kernel:
        first, second = kernel.run(cores), kernel.run(cores)
        assert len(_jobs(engine)) == len(before) + 1  # the build waits between runs in a folder of its own
    assert first.ok and second.ok, (first.detail, second.detail)
    assert len(compiles) == 1 and kernel.runs == 2
    assert first.key == second.key and first.compile_s == second.compile_s > 0
    assert first.median_s != second.median_s  # two timed processes, not one figure twice
    assert _jobs(engine) == before  # closing removes it
    with pytest.raises(RuntimeError, match="after close"):
        kernel.run(cores)


@pytest.mark.integration
def test_a_program_changed_between_runs_is_a_violation(own: Engine, cores: tuple[int, ...]) -> None:
    engine = own
    with engine.prepare(GOOD + "\n/* changed */\n") as kernel:
        assert kernel.run(cores).ok
        (job,) = [j for j in _jobs(engine) if (j / "bench").exists()]
        exe = job / "bench"
        exe.write_bytes(exe.read_bytes() + b"\0")
        r = kernel.run(cores)
    assert r.status is Status.FORMAT_VIOLATION and "changed" in r.detail


def _answer(r: BenchResult) -> BenchResult:
    """``r`` without what each run measures of its own wait for the slot (``slot_wait_s``)."""
    return dataclasses.replace(r, extra={k: v for k, v in r.extra.items() if k != "slot_wait_s"})


@pytest.mark.integration
def test_a_kernel_that_fails_to_build_answers_with_its_failure_and_leaves_nothing(
        own: Engine, cores: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    engine = own
    compiles = _count_compiles(monkeypatch)
    before = _jobs(engine)
    kernel = engine.prepare("```c\nvoid dgemm(int n, const double *A, const double *B, double *C) { x = ; }\n```")
    first = kernel.run(cores)
    assert first.status is Status.COMPILE_ERROR, first.detail
    assert _jobs(engine) == before
    assert _answer(kernel.run(cores)) == _answer(first) and len(compiles) == 1
    kernel.close()
    assert _answer(kernel.run(cores)) == _answer(first)  # a failure stays the kernel's answer
    no_code = engine.prepare("no code here")
    assert no_code.run(cores).status is Status.FORMAT_VIOLATION and len(compiles) == 1


@pytest.mark.integration
def test_the_executor_builds_each_kernel_once_and_cleans_up(own: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    compiles = _count_compiles(monkeypatch)
    params = fast_params(timing={**fast_params().timing.model_dump(), "fresh_runs": 3})
    engine = Engine(params, Settings(cache_dir=own.cache_dir, scratch_dir=own.scratch))
    before = _jobs(engine)
    with LocalExecutor(engine) as ex:
        got = ex.map([GOOD + f"\nstatic const int v{i} = {i};\n" for i in range(3)])  # 3 distinct kernels
    assert all(r.ok and r.extra["fresh_runs"] == 3 for r in got)
    assert len(compiles) == 3 and _jobs(engine) == before
