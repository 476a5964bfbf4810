"""Tests of reference measurements: numpy in its own process, the shipped kernels, refresh by age.

Run: pytest tests/bench/test_reference.py
"""

from __future__ import annotations

import os
import time

import pytest

from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.reference import ReferenceTracker, measure_numpy

pytestmark = pytest.mark.integration


def test_numpy_reference_runs_in_its_own_pinned_process(cores: tuple[int, ...]) -> None:
    m = measure_numpy(128, cores, quantile=0.1)
    assert m.gflops > 0.1 and m.reps >= 5 and 0 <= m.cv < 5
    assert m.info["blas"] and m.info["blas"][0]["num_threads"] == 1


def test_tracker_measures_once_then_refreshes_by_age(engine: Engine) -> None:
    with LocalExecutor(engine) as ex:
        tracker = ReferenceTracker(ex, "naive", ttl_s=0.5)
        before = ex.completed
        first = tracker.gflops(64)
        assert first > 0 and ex.completed == before + 1
        assert tracker.gflops(64) == first and ex.completed == before + 1  # fresh enough: no new measurement
        time.sleep(0.6)
        tracker.gflops(64)
        assert ex.completed == before + 2  # stale: measured again


def test_tracker_rejects_unknown_kind(engine: Engine) -> None:
    with LocalExecutor(engine) as ex, pytest.raises(ValueError, match="best_kernel"):
        ReferenceTracker(ex, "mkl", ttl_s=1)


def test_disturbed_runs_are_repeated_and_carry_their_load(bench_dirs, cores: tuple[int, ...]) -> None:
    from tests.bench.test_adversarial import GOOD
    from tests.conftest import fast_params

    params = fast_params(timing={"warmup_calls": 1, "min_reps": 3, "max_reps": 1000, "min_time_s": 0.6,
                                 "max_time_s": 2.0, "max_foreign_load": 0.1, "disturbed_retries": 2})
    eng = Engine(params, bench_dirs)
    hog = os.fork()
    if hog == 0:  # a foreign process spinning on the slot's core
        os.sched_setaffinity(0, cores)
        while True:
            pass
    try:
        time.sleep(0.2)
        r = eng.run(GOOD, cores)
    finally:
        os.kill(hog, 9)
        os.waitpid(hog, 0)
    assert r.ok, r.detail
    assert r.retries == 2 and r.foreign_load is not None and r.foreign_load > 0.2
