"""Machine-wide core slots: reentrant within a thread, exclusive across threads and processes, released when a
process dies; two engine processes started together never hold the same core at once, and neither sees the other
as foreign load. (Whether each then gets the figure it gets alone depends on the host's noise: make bench.)

Run: pytest tests/bench/test_slots.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hpcrl_core.bench.slots import CoreLocks

ROOT = Path(__file__).resolve().parents[2]


def test_reentrant_in_a_thread_exclusive_across_threads(tmp_path: Path) -> None:
    locks = CoreLocks(tmp_path)
    entered = threading.Event()
    with locks.hold((0, 1)), locks.hold((1,)):  # the executor holds a slot around Engine.run, which holds it too

        def other() -> None:
            with locks.hold((1,)):
                entered.set()

        t = threading.Thread(target=other)
        t.start()
        time.sleep(0.2)
        assert not entered.is_set(), "another thread took a core this thread holds"
    t.join(5)
    assert entered.is_set(), "the core was not released"


def test_hold_any_takes_a_free_slot(tmp_path: Path) -> None:
    locks = CoreLocks(tmp_path)
    got: list[tuple[int, ...]] = []
    with locks.hold((0,)):
        t = threading.Thread(target=lambda: got.append(_any(locks, [(0,), (1,)])))
        t.start()
        t.join(5)
    assert got == [(1,)]


def _any(locks: CoreLocks, slots: list[tuple[int, ...]]) -> tuple[int, ...]:
    with locks.hold_any(slots) as (slot, _):
        return slot


HOLDER = """
import sys, time
from hpcrl_core.bench.slots import CoreLocks
with CoreLocks(sys.argv[1]).hold((0,)):
    print("held", flush=True)
    time.sleep(60)
"""


def test_other_processes_queue_and_a_dead_holder_releases(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        locks = CoreLocks(tmp_path)
        got: list[float] = []
        t = threading.Thread(target=lambda: got.append(_waited(locks)))
        t.start()
        time.sleep(0.3)
        assert not got, "a core held by another process was taken"
        os.kill(holder.pid, signal.SIGKILL)  # the kernel releases a dead process's flock
        t.join(10)
        assert got and got[0] >= 0.3
    finally:
        holder.kill()
        holder.wait()


def _waited(locks: CoreLocks) -> float:
    with locks.hold((0,)) as waited:
        return waited


BENCH = """
import json, sys, tempfile, os, time
from pathlib import Path
from hpcrl_core.bench.engine import Engine
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.bench.reference import ladder_kernels
from hpcrl_core.config import Params, Settings
root = Path(tempfile.mkdtemp(prefix="hpcrl-slots-")); os.chmod(root, 0o755)
engine = Engine(Params().bench.model_copy(update={"cache": False, "n": 256}),  # shared cache: one speed reference
                Settings(cache_dir=sys.argv[2], scratch_dir=root / "s", lock_dir=sys.argv[1]))
spans = []
prepare = engine.prepare
def prepared(code, n=None):  # each run records when it held its cores (CLOCK_MONOTONIC is every process's)
    kernel = prepare(code, n); run = kernel.run
    def timed(cores):
        t0 = time.monotonic(); r = run(cores)
        spans.append([list(cores), t0 + r.extra["slot_wait_s"], time.monotonic()]); return r
    kernel.run = timed; return kernel
engine.prepare = prepared
k = ladder_kernels()
with LocalExecutor(engine, cores_per_slot=1) as ex:
    rs = ex.map([k["ikj"], k["blocked"], k["naive"], k["packed"]])
print(json.dumps({"results": [[r.status.value, r.gflops, r.foreign_load] for r in rs], "spans": spans}))
"""


@pytest.mark.integration
def test_two_engine_processes_never_time_on_the_same_core(tmp_path: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 cores")

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-c", textwrap.dedent(BENCH), str(tmp_path / "locks"),
                                 str(tmp_path / "cache")], cwd=ROOT, stdout=subprocess.PIPE, text=True)

    def output(p: subprocess.Popen[str]) -> dict:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        return json.loads(out.strip().splitlines()[-1])

    loads: list[list[float | None]] = []
    for _ in range(3):  # a busy host shows as foreign load too: a clean pair among three settles it
        a, b = (output(p) for p in [start(), start()])  # started together, each with both cores as slots
        for cores_a, a0, a1 in a["spans"]:
            for cores_b, b0, b1 in b["spans"]:
                if set(cores_a) & set(cores_b):
                    assert a1 <= b0 or b1 <= a0, "jobs of two engine processes held the same core at once"
        assert all(status == "ok" for run in (a, b) for status, _, _ in run["results"]), (a, b)
        loads.append([load for run in (a, b) for _, _, load in run["results"]])
        if all(load is not None and load <= 0.10 for load in loads[-1]):
            return  # nobody else timed on a core being timed
    pytest.fail(f"foreign load above 0.10 in three pairs of runs (slots shared, or a busy host): {loads}")
