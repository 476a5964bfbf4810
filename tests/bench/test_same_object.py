"""Tests of one figure per machine code: kernels whose source differs but whose compiled object does not share the
cached figure of the first one timed (``Engine.object_key``), with their own key and techniques; one whose object
another job is timing waits for that figure.

Run: pytest tests/bench/test_same_object.py
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import Settings
from tests.bench.test_adversarial import GOOD, SIG
from tests.bench.test_fresh_runs import _kernel, _ok, _ScriptedEngine, _ScriptedKernel
from tests.conftest import fast_params

# the same ikj kernel three ways: as GOOD, with an include it never uses, with its loop variable renamed
UNUSED_INCLUDE = "#include <string.h>\n" + GOOD
RENAMED = GOOD.replace("int k = 0; k < n; k++", "int p = 0; p < n; p++").replace("i*n + k]", "i*n + p]") \
    .replace("B[k*n + j]", "B[p*n + j]")
# a different kernel: i-j-k with a scalar sum
IJK = SIG + """{
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) { double s = 0.0; for (int k = 0; k < n; k++) s += A[i*n + k] * B[k*n + j];
      C[i*n + j] = s; }
}"""


@pytest.fixture
def engine(bench_dirs: Settings) -> Iterator[Engine]:
    """An engine with a result cache of its own (a figure from another test must not answer here)."""
    root = Path(tempfile.mkdtemp(prefix="hpcrl-object-", dir=bench_dirs.scratch_dir.parent))
    root.chmod(0o755)
    yield Engine(fast_params(), Settings(cache_dir=root / "cache", scratch_dir=bench_dirs.scratch_dir))
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.integration
def test_sources_with_one_machine_code_share_its_figure(engine: Engine) -> None:
    cache = ResultCache(engine.cache_dir / "bench.sqlite")
    assert RENAMED != GOOD and "p < n" in RENAMED
    with LocalExecutor(engine, cache) as ex:
        first = ex.submit(GOOD).result()
        same = [ex.submit(code).result() for code in (UNUSED_INCLUDE, RENAMED)]
        other = ex.submit(IJK).result()
    assert first.ok and all(r.ok for r in same) and other.ok, [r.detail for r in (first, *same, other)]
    assert first.object_key and first.key != first.object_key and "same_object" not in first.extra
    for r in same:
        assert r.object_key == first.object_key and r.key not in (first.key, "")  # its own source key
        assert r.gflops == first.gflops and r.median_s == first.median_s  # the figure, not a second timing
        assert r.cached and r.extra["same_object"] == first.key and r.compile_s > 0
    assert other.object_key != first.object_key and "same_object" not in other.extra
    # the shared figure is cached under each source's own key too: the next time, a plain hit
    again = cache.get(same[0].key)
    assert again is not None and again.gflops == first.gflops


@pytest.mark.integration
def test_without_a_cache_every_kernel_is_timed(engine: Engine) -> None:
    with LocalExecutor(engine) as ex:
        a, b = ex.map([GOOD, UNUSED_INCLUDE])
    assert a.ok and b.ok and a.object_key == b.object_key
    assert "same_object" not in b.extra and a.median_s != b.median_s  # two timings


@pytest.mark.integration
def test_a_failure_is_shared_by_its_machine_code(engine: Engine) -> None:
    wrong = SIG + "{ for (int i = 0; i < n * n; i++) C[i] = 1.0; }"
    cache = ResultCache(engine.cache_dir / "bench.sqlite")
    with LocalExecutor(engine, cache) as ex:
        first = ex.submit(wrong).result()
        second = ex.submit("#include <stddef.h>\n" + wrong).result()
    assert first.status is second.status is Status.WRONG_RESULT
    assert second.extra["same_object"] == first.key and second.detail == first.detail


def test_figures_are_never_shared_across_sizes_or_engine_params(engine: Engine) -> None:
    obj = b"\x7fELF same bytes"
    key = engine.object_key(obj, 256, 1)
    assert key == engine.object_key(obj, 256, 1)
    assert len({key, engine.object_key(obj, 257, 1), engine.object_key(obj, 256, 2),
                engine.object_key(obj + b"\0", 256, 1)}) == 4
    slower = Engine(fast_params(cflags=["-O1"]), Settings(cache_dir=engine.cache_dir, scratch_dir=engine.scratch))
    assert slower.object_key(obj, 256, 1) != key


class _ObjectKernel(_ScriptedKernel):
    """The scripted kernel with a machine code: kernels named ``<object>.<variant>`` share ``<object>``."""

    def __init__(self, engine: _ScriptedEngine, completion: str, n: int | None) -> None:
        super().__init__(engine, completion, n)
        self.name = completion.split("/*")[1].split("*/")[0].strip()

    @property
    def object_key(self) -> str:
        return "object:" + self.name.split(".")[0]

    @property
    def base(self) -> dict:
        return {**super().base, "techniques": (self.name,), "compile_s": 0.25}

    def run(self, cores: tuple[int, ...]) -> BenchResult:
        return dataclasses.replace(super().run(cores), object_key=self.object_key, techniques=(self.name,))


class _ObjectEngine(_ScriptedEngine):
    def prepare(self, completion: str, n: int | None = None) -> _ObjectKernel:
        return _ObjectKernel(self, completion, n)


def test_a_kernel_whose_machine_code_is_being_timed_waits_for_that_figure(tmp_path: Path) -> None:
    # one slot, two fresh runs: x.1 is timed; x.2 (same object) comes up between x.1's runs and must wait, then take
    # x.1's figure; y.1 (another object) is timed meanwhile
    eng = _ObjectEngine(tmp_path, 2, {"x.1": [_ok(10.0), _ok(12.0)], "x.2": [_ok(99.0), _ok(99.0)],
                                      "y.1": [_ok(5.0), _ok(6.0)]})
    cache = ResultCache(tmp_path / "c.sqlite")
    with LocalExecutor(eng, cache, cores=[0]) as ex:  # type: ignore[arg-type]
        x1, x2, y1 = ex.map([_kernel("x.1"), _kernel("x.2"), _kernel("y.1")])
    assert eng.order == ["x.1", "y.1", "x.1", "y.1"]  # x.2 was never timed
    assert (x1.gflops, x2.gflops, y1.gflops) == (12.0, 12.0, 6.0)
    assert x2.cached and x2.extra["same_object"] == x1.key and x2.key not in ("", x1.key)
    assert x2.techniques == ("x.2",) and x2.compile_s == 0.25  # its own screen and build, the shared timing
    assert "same_object" not in x1.extra and "same_object" not in y1.extra


def test_a_disturbed_figure_is_not_shared_and_a_timeout_frees_the_object(tmp_path: Path) -> None:
    eng = _ObjectEngine(tmp_path, 1, {"d.1": [_ok(3.0, disturbed=True, slowdown=1.8)], "d.2": [_ok(7.0)],
                                      "t.1": [BenchResult(Status.TIMEOUT, detail="killed")], "t.2": [_ok(4.0)]})
    cache = ResultCache(tmp_path / "c.sqlite")
    with LocalExecutor(eng, cache, cores=[0]) as ex:  # type: ignore[arg-type]
        d1 = ex.submit(_kernel("d.1")).result()
        d2 = ex.submit(_kernel("d.2")).result()
        t1, t2 = ex.map([_kernel("t.1"), _kernel("t.2")])
    # a disturbed figure is measured again rather than handed on; a timeout is not cached, so its twin is timed
    assert d1.disturbed and d2.gflops == 7.0 and "same_object" not in d2.extra
    assert t1.status is Status.TIMEOUT and t2.gflops == 4.0
    assert eng.order == ["d.1", "d.2", "t.1", "t.2"]


def test_a_figure_cached_just_before_the_claim_is_taken_not_timed_again(tmp_path: Path) -> None:
    # the interleaving that timed one machine code twice: a job that found no figure and no claim, while the job
    # timing that object put its figure and released its claim in between; here the put lands right before the
    # claim is asked for, so the figure must be read after claiming
    eng = _ObjectEngine(tmp_path, 1, {"z.2": [_ok(99.0)]})
    cache = ResultCache(tmp_path / "c.sqlite")
    timed = dataclasses.replace(_ok(8.0), key="object:z", object_key="object:z", extra={"timed_as": "z1-key"})
    with LocalExecutor(eng, cache, cores=[0]) as ex:  # type: ignore[arg-type]
        claim = ex._object_busy

        def put_then_claim(okey: str) -> bool:
            cache.put(timed)  # the other job's figure, put just before it released its claim
            return claim(okey)

        ex._object_busy = put_then_claim  # type: ignore[method-assign]
        z2 = ex.submit(_kernel("z.2")).result()
    assert eng.order == [] and z2.gflops == 8.0 and z2.extra["same_object"] == "z1-key"
    assert not ex._objects  # the claim taken to read the cache was given back
