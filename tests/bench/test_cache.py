"""Tests of the SQLite result cache. Run: pytest tests/bench/test_cache.py"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.result import BenchResult, Status


def _writer(path: str, start: int) -> None:
    cache = ResultCache(Path(path))
    for i in range(start, start + 50):
        cache.put(BenchResult(status=Status.OK, gflops=float(i), key=f"k{i}", techniques=("simd",)))


def test_round_trip_marks_cached_and_counts_hits(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "c.sqlite")
    r = BenchResult(status=Status.WRONG_RESULT, detail="C[0][0] wrong", n=64, key="abc", techniques=("openmp",))
    assert cache.get("abc") is None
    cache.put(r)
    got = cache.get("abc")
    assert got is not None and got.cached and got.status is Status.WRONG_RESULT and got.techniques == ("openmp",)
    assert (cache.hits, cache.misses, cache.hit_rate) == (1, 1, 0.5)
    # persistent across instances
    assert ResultCache(tmp_path / "c.sqlite").get("abc") is not None


def test_several_processes_write_safely(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    ResultCache(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), 50 * i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cache = ResultCache(path)
    assert len(cache) == 200
    got = cache.get("k137")
    assert got is not None and got.gflops == 137.0
