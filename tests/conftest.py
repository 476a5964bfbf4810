"""Shared fixtures: a benchmark engine with small, fast settings in a private scratch and cache folder.

Run all default tests: ``make test`` (or ``.venv/bin/python -m pytest``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hpcrl_core.bench.engine import Engine
from hpcrl_core.config import BenchParams, Settings, parse_params

FAST_BENCH = {
    "n": 64,
    "run_timeout_s": 8.0,
    "compile_timeout_s": 30.0,
    "verify": {"small_n": 13},
    # probe_tolerance 1.0 and min_clean_share 0: tests check behaviour, not figures, so a host at half speed must
    # not mark results disturbed (and uncached); tests/bench/test_speed.py checks the judgement itself; one fresh
    # run per figure (tests/bench/test_fresh_runs.py checks the best-of rule)
    "timing": {"warmup_calls": 1, "min_reps": 3, "max_reps": 50, "min_time_s": 0.01, "max_time_s": 0.5,
               "disturbed_retries": 0, "probe_tolerance": 1.0, "min_clean_share": 0.0, "fresh_runs": 1},
    "short_timing": {"min_reps": 3, "min_time_s": 0.05, "max_time_s": 0.5, "disturbed_retries": 0,
                     "probe_tolerance": 1.0, "min_clean_share": 0.0, "fresh_runs": 1},
    "sandbox": {"cpu_s": 20, "memory_mb": 1024},
}


def fast_params(**bench_overrides: object) -> BenchParams:
    merged = {**FAST_BENCH, **bench_overrides}
    return parse_params({"bench": merged}).bench


@pytest.fixture(scope="session")
def bench_dirs() -> Iterator[Settings]:
    # Not under pytest's tmp folder: that is private (0700) and the sandboxed user could not reach its binary.
    root = Path(tempfile.mkdtemp(prefix="hpcrl-test-"))
    os.chmod(root, 0o755)
    yield Settings(cache_dir=root / "cache", scratch_dir=root / "scratch")
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def engine(bench_dirs: Settings) -> Engine:
    return Engine(fast_params(), bench_dirs)


@pytest.fixture(scope="session")
def cores() -> tuple[int, ...]:
    return (sorted(os.sched_getaffinity(0))[0],)
