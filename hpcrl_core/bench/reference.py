"""Reference measurements of this node: the shipped kernel ladder, numpy's DGEMM and the peak estimate.

Rewards relative to a reference need it measured on the same node, close in time, in its own process:
``ReferenceTracker`` re-measures when its figure is older than ``reward.reference_ttl_s`` and always measures on
an exclusive executor slot, like a kernel.

Run: ``hpcrl bench --reference``.  Test: ``pytest tests/bench/test_reference.py``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.procs import run_tool
from hpcrl_core.bench.slots import core_locks
from hpcrl_core.config import Settings
from hpcrl_core.errors import BenchInfraError

KERNELS_DIR = Path(str(resources.files("hpcrl_core.bench") / "kernels"))
LADDER = ("naive", "ikj", "blocked", "blocked_omp_simd", "packed")  # slow to fast
BEST_KERNEL = "packed"


def ladder_kernels() -> dict[str, str]:
    """The shipped reference kernels, slowest first: name -> C source."""
    return {name: (KERNELS_DIR / f"{name}.c").read_text() for name in LADDER}


@dataclass(frozen=True)
class NumpyMeasure:
    gflops: float
    cv: float
    reps: int
    info: dict[str, Any] = field(default_factory=dict)


def measure_numpy(n: int, cores: Sequence[int], *, quantile: float, timeout: float = 300.0,
                  lock_dir: Path | None = None) -> NumpyMeasure:
    """Time numpy's DGEMM with as many BLAS threads as ``cores``, pinned to them, in a fresh process.

    The figure comes from the same ``quantile`` of the call times as a kernel's (``bench.timing.quantile``), and
    the cores are held machine-wide meanwhile (a no-op for the executor's worker, which holds them already).

    Raises:
        BenchInfraError: numpy is missing, or its BLAS failed or computed wrong results.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    argv = [sys.executable, "-m", "hpcrl_core.bench.numpy_ref", "--n", str(n), "--threads", str(len(cores)),
            "--quantile", repr(quantile)]
    with core_locks(lock_dir or Settings().lock_dir).hold(cores):
        res = run_tool(argv, timeout=timeout, cores=cores, env=env)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if res.timed_out or not lines:
        raise BenchInfraError(f"numpy reference failed: {(res.stderr or res.stdout).strip()[-400:]}")
    d = json.loads(lines[-1])
    if "error" in d:
        raise BenchInfraError(f"numpy reference: {d['error']}")
    return NumpyMeasure(d["gflops"], d["cv"], d["reps"], {"blas": d.get("blas"), "numpy": d.get("numpy")})


def submit_numpy(executor: LocalExecutor, n: int) -> Future[NumpyMeasure]:
    """numpy's DGEMM at size n on a slot of ``executor``, as rewards, the evaluation and ``hpcrl bench`` compare
    kernels with it: the measurement with the highest GFLOPS of ``timing.fresh_runs`` runs in fresh processes, apart
    in time like a kernel's figure (a single run in a slow phase of the host read 40% low and skewed every reward at
    its n until measured again; docs/bench.md).
    """
    engine = executor.engine
    return executor.submit_best_on_slot(lambda slot: measure_numpy(
        n, slot, quantile=engine.params.timing.quantile, lock_dir=engine.locks.folder),
        engine.params.timing.fresh_runs, key=lambda m: m.gflops)


class ReferenceTracker:
    """The reference GFLOPS (numpy, best_kernel or naive) for the executor's slot size, refreshed by age."""

    def __init__(self, executor: LocalExecutor, kind: str, ttl_s: float) -> None:
        if kind not in ("numpy", "best_kernel", "naive"):
            raise ValueError(f"unknown reference {kind!r}; allowed: numpy, best_kernel, naive")
        self.executor, self.kind, self.ttl_s = executor, kind, ttl_s
        self._values: dict[int, tuple[float, float]] = {}  # n -> (gflops, measured at)
        self._lock = threading.Lock()

    def gflops(self, n: int) -> float:
        """The reference figure at size n, measured now if missing or stale."""
        with self._lock:
            got = self._values.get(n)
            if got and time.monotonic() - got[1] < self.ttl_s:
                return got[0]
            value = self._measure(n)
            self._values[n] = (value, time.monotonic())
            return value

    def _measure(self, n: int) -> float:
        if self.kind == "numpy":
            return submit_numpy(self.executor, n).result().gflops
        name = BEST_KERNEL if self.kind == "best_kernel" else "naive"
        # bypass the cache: the point is a fresh figure on today's node
        code = ladder_kernels()[name]
        res = self.executor.submit_on_slot(lambda slot: self.executor.engine.run(code, slot, n)).result()
        if not res.ok or not res.gflops:
            raise BenchInfraError(f"reference kernel {name} failed on this node: {res.status} {res.detail}")
        return res.gflops
