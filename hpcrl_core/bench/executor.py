"""LocalExecutor: benchmarks batches of kernels on this machine, each timed run on an exclusive core slot.

The machine's cores are split into slots of ``cores_per_slot``. One worker per slot takes a job, holds the first
slot that is free machine-wide (``slots.py``: other engine processes on the host queue for the same cores),
compiles it pinned to that slot's cores, then times it there. So compiles run in parallel across slots, no two
timed runs share a core, even across processes, and a compile never runs on a core that is being timed. OpenMP in
the run is set to the slot.

Interface (a later backend puts remote CPU agents behind the same one):
    fut = ex.submit(completion)          # concurrent.futures.Future[BenchResult]
    res = await ex.submit_async(completion)
    results = ex.map(completions)        # in input order
A figure is the best of ``timing.fresh_runs`` runs of the kernel in fresh processes, which time one linked program
(``Engine.prepare``: one compile per kernel): after each run the job goes behind the waiting work (at most
``SPACING_PER_SLOT`` jobs per slot), so the runs are apart in time by that work, and one slow phase of the shared
host rarely covers them all (a run that fails decides the result at once; ``best_of`` keeps the fastest undisturbed
figure). A figure the engine marked disturbed (a busy host) is cached but measured again when the same kernel comes
back, up to three times, keeping the figure taken nearest full host speed. Identical kernels in flight share one
job; finished ones come from the cache. A kernel that misses the cache is built, and if its compiled object
already has a figure (``Engine.object_key``: same machine code, another source) it takes that figure untimed;
if another job is timing that object now, it waits in the queue for the figure (docs/bench.md, "Cache"). A
``BenchInfraError`` is set on the future (and raised by ``result()``), never turned into a result.

Test: ``pytest tests/bench/test_executor.py``.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from hpcrl_core.bench.cache import ResultCache
from hpcrl_core.bench.engine import Engine, Kernel
from hpcrl_core.bench.extract import extract_code
from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import BenchParams, Settings
from hpcrl_core.errors import ConfigError

_STOP = object()
T = TypeVar("T")


def make_slots(cores: Sequence[int], cores_per_slot: int) -> list[tuple[int, ...]]:
    """Split cores into disjoint slots; leftover cores stay unused (never half a slot).

    Raises:
        ConfigError: fewer cores than one slot needs.
    """
    cores = sorted(cores)
    if len(cores) < cores_per_slot:
        raise ConfigError(f"bench.executor.cores_per_slot is {cores_per_slot} but only {len(cores)} cores are "
                          f"available ({cores}); lower cores_per_slot or list more cores")
    count = len(cores) // cores_per_slot
    return [tuple(cores[i * cores_per_slot:(i + 1) * cores_per_slot]) for i in range(count)]


MAX_MEASUREMENTS = 3  # a disturbed figure is measured again on later submissions, this many times in all


def measure_again(hit: BenchResult) -> bool:
    """A cached figure the engine marked disturbed is measured again, up to ``MAX_MEASUREMENTS`` times."""
    return hit.disturbed and int(hit.extra.get("measurements", 1)) < MAX_MEASUREMENTS


def _better(previous: BenchResult | None, new: BenchResult) -> BenchResult:
    """The figure to keep after measuring a disturbed cached one again: an undisturbed one, else the one taken
    with the host nearest full speed; it counts the measurements so far."""
    if previous is None:
        return new
    count = {"measurements": int(previous.extra.get("measurements", 1)) + 1}
    keep = new
    if new.ok and previous.ok and new.disturbed and \
            float(previous.extra.get("host_slowdown", 9)) < float(new.extra.get("host_slowdown", 9)):
        keep = dataclasses.replace(previous, cached=False)
    return dataclasses.replace(keep, extra={**keep.extra, **count})


def best_of(runs: Sequence[BenchResult]) -> BenchResult:
    """One figure from fresh runs of one kernel: the first failure if any run failed (a kernel that is wrong once
    is wrong), else the fastest undisturbed run, else the run taken with the host nearest full speed. ``extra``
    records every run's GFLOPS and ``run_s`` is the runs' total, so costs stay honest."""
    if not runs:
        raise ValueError("best_of needs at least one run")
    if len(runs) == 1:
        return runs[0]
    failed = [r for r in runs if not r.ok]
    if failed:
        keep = failed[0]
    else:
        clean = [r for r in runs if not r.disturbed]
        keep = max(clean, key=lambda r: r.gflops or 0.0) if clean else \
            min(runs, key=lambda r: float(r.extra.get("host_slowdown", 9)))
    extra = {**keep.extra, "fresh_runs": len(runs), "gflops_runs": [r.gflops for r in runs]}
    return dataclasses.replace(keep, run_s=sum(r.run_s for r in runs), extra=extra)


class _Again:
    """What a job returns when it must run again later (``_work`` queues it behind the waiting work)."""


SPACING_PER_SLOT = 8  # a job's next fresh run waits behind at most this many queued jobs per slot


class _JobQueue:
    """A FIFO of jobs whose ``put_behind`` places a job that must run again behind at most ``depth`` waiting
    ones: its runs are apart by that much work (about a second at the reward's settings), while in a long batch
    jobs still finish as it goes, not all after the last first run, and only so many builds wait at a time."""

    def __init__(self) -> None:
        self._items: collections.deque[Any] = collections.deque()
        self._ready = threading.Condition()

    def put(self, item: Any) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()

    def put_behind(self, item: Any, depth: int) -> None:
        with self._ready:
            self._items.insert(min(depth, len(self._items)), item)
            self._ready.notify()

    def get(self) -> Any:
        with self._ready:
            while not self._items:
                self._ready.wait()
            return self._items.popleft()


_AGAIN = _Again()


class BenchBackend(Protocol):
    """What stages and ``hpcrl bench`` use of a benchmark backend: ``LocalExecutor``, or the CPU agents behind a
    Prefect server (``tasks/agents_backend.py``). ``submit`` returns at once; a future carries the result, or a
    ``BenchInfraError`` for a fault of the machinery."""

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]: ...

    def map(self, completions: Iterable[str | bytes], n: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> list[BenchResult]: ...

    def close(self) -> None: ...

    def __enter__(self) -> BenchBackend: ...

    def __exit__(self, *exc: object) -> None: ...


BackendFactory = Callable[[BenchParams, Settings, "int | None", "str | None"], BenchBackend]
BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Registers a backend factory under ``name``, the value of ``HPCRL_BENCH_BACKEND`` that chooses it. The
    ``agents`` backend needs Prefect, so the orchestration layer registers it (importing ``tasks.agents_backend``)."""
    def add(factory: BackendFactory) -> BackendFactory:
        BACKENDS[name] = factory
        return factory
    return add


def bench_backend(bench: BenchParams, settings: Settings, cores_per_slot: int | None = None,
                  reference: str | None = None) -> BenchBackend:
    """The backend ``settings.bench_backend`` names, built with ``bench``. Close it (``with``).

    ``reference`` (a ``reward.reference`` kind) asks a remote backend to attach the figure of the node that timed
    each verified kernel (``extra["node_reference_gflops"]``); locally every kernel runs on this node, whose
    reference a ``ReferenceTracker`` measures, so the local backend ignores it.

    Raises:
        ConfigError: the name is registered by no imported module.
    """
    factory = BACKENDS.get(settings.bench_backend)
    if factory is None:
        raise ConfigError(f"HPCRL_BENCH_BACKEND={settings.bench_backend!r} is not available here (known: "
                          f"{', '.join(sorted(BACKENDS))}); the agents backend comes with the Prefect layer: run "
                          "the stage through its flow, or `hpcrl bench --backend agents`")
    return factory(bench, settings, cores_per_slot, reference)


def local_executor(bench: BenchParams, settings: Settings, cores_per_slot: int | None = None,
                   reference: str | None = None, cores: Sequence[int] | None = None) -> LocalExecutor:
    """The one way stages (and CPU agents, on their ``cores``) build a local backend: an ``Engine`` with ``bench``,
    the node's shared result cache (``<cache_dir>/bench.sqlite``) when ``bench.cache``, and a ``LocalExecutor`` over
    them. Close it (``with``)."""
    cache = ResultCache(Path(settings.cache_dir) / "bench.sqlite") if bench.cache else None
    return LocalExecutor(Engine(bench, settings), cache, cores=cores, cores_per_slot=cores_per_slot)


def map_in_order(backend: BenchBackend, completions: Iterable[str | bytes], n: int | None = None,
                 progress: Callable[[int, int], None] | None = None) -> list[BenchResult]:
    """Submit every completion at once, then wait; results in input order. ``progress(done, total)`` is called as
    results arrive (each backend's ``map``)."""
    return map_sized(backend, [(c, n) for c in completions], progress)


def map_sized(backend: BenchBackend, jobs: Sequence[tuple[str | bytes, int | None]],
              progress: Callable[[int, int], None] | None = None) -> list[BenchResult]:
    """``map_in_order`` over ``(completion, n)`` jobs, each timed at its own size: submit all, then wait; results in
    input order."""
    futures = [backend.submit(c, n) for c, n in jobs]
    if progress:
        for done, f in enumerate(futures, 1):
            f.result()
            progress(done, len(futures))
    return [f.result() for f in futures]


register_backend("local")(local_executor)


class LocalExecutor:
    """See the module docstring. Use as a context manager, or call ``close()``."""

    def __init__(self, engine: Engine, cache: ResultCache | None = None, cores: Sequence[int] | None = None,
                 cores_per_slot: int | None = None) -> None:
        p = engine.params.executor
        self.engine = engine
        self.cache = cache
        available = cores or p.cores or sorted(os.sched_getaffinity(0))
        self.slots = make_slots(available, cores_per_slot or p.cores_per_slot)
        self._queue = _JobQueue()
        self._inflight: dict[str, Future[BenchResult]] = {}
        self._objects: set[str] = set()  # object keys a job is timing now (``_measure``)
        self._lock = threading.Lock()
        self._closing = False
        self.completed = 0
        self._workers = [threading.Thread(target=self._work, daemon=True, name=f"bench-worker-{i}")
                         for i in range(len(self.slots))]
        for w in self._workers:
            w.start()

    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        """Queue one completion; returns a future of its result."""
        n = n or self.engine.params.n
        ex = extract_code(completion, self.engine.params.max_code_bytes)
        key = self.engine.key(ex.code, n, len(self.slots[0])) if ex.code else None
        if key is not None:
            with self._lock:
                if key in self._inflight:
                    return self._inflight[key]
            hit = self.cache.get(key) if self.cache is not None and self.engine.params.cache else None
            if hit is not None and not measure_again(hit):
                fut: Future[BenchResult] = Future()
                fut.set_result(hit)
                return fut
        else:
            hit = None
        fut = Future()
        if key is not None:
            with self._lock:
                self._inflight[key] = fut
        self._queue.put((self._measure(completion, n, hit), key, fut))
        return fut

    def _measure(self, completion: str | bytes, n: int, hit: BenchResult | None) \
            -> Callable[[tuple[int, ...]], BenchResult | _Again]:
        """The job that measures one kernel: one fresh run per call (the first builds the kernel, the later ones
        time the same linked program), ``_AGAIN`` until ``fresh_runs`` are taken (or one failed), then their
        ``best_of``, weighed against a disturbed cached figure being measured again. Once built, a kernel whose
        machine code has a figure already (``Engine.object_key``, in the cache) takes that figure and is not timed;
        one whose machine code another job is timing right now waits behind the queue for that figure."""
        want = self.engine.params.timing.fresh_runs
        kernel = self.engine.prepare(completion, n)
        taken: list[BenchResult] = []
        owned: list[str] = []  # the object key this job claimed for timing

        def run(slot: tuple[int, ...]) -> BenchResult | _Again:
            try:
                if not taken and not owned:
                    failed = kernel.build(slot)
                    if failed is not None:
                        kernel.close()
                        return failed
                    if self._object_busy(kernel.object_key):
                        return _AGAIN
                    # claimed (or nothing to claim): the cache is read only now, so a figure that a job put there
                    # just before releasing its claim is seen, not timed a second time
                    same = self._same_object(kernel, hit)
                    if same is not None:
                        self._release_object([kernel.object_key])
                        kernel.close()
                        return same
                    owned.append(kernel.object_key)
                taken.append(kernel.run(slot))
            except BaseException:
                kernel.close()
                self._release_object(owned)
                raise
            if taken[-1].ok and len(taken) < want:
                return _AGAIN
            kernel.close()  # the claim on its object key ends once its figure is cached (``_work``)
            return _better(hit, best_of(taken))
        return run

    def _same_object(self, kernel: Kernel, hit: BenchResult | None) -> BenchResult | None:
        """The cached figure of the built kernel's machine code, as this kernel's result (its own source key,
        techniques and build time), or None: no cache, no figure, or one that is to be measured again. Not when the
        kernel's own figure is being measured again (``hit``): that one is timed."""
        okey = kernel.object_key
        if not okey or hit is not None or self.cache is None or not self.engine.params.cache:
            return None
        same = self.cache.get(okey)
        if same is None or measure_again(same):
            return None
        base = kernel.base
        return dataclasses.replace(same, key=base["key"], techniques=base.get("techniques", same.techniques),
                                   compile_s=float(base.get("compile_s", 0.0)), cached=True,
                                   extra={**{k: v for k, v in same.extra.items() if k != "timed_as"},
                                          "same_object": same.extra.get("timed_as", "")})

    def _object_busy(self, okey: str) -> bool:
        """Whether another job is timing this machine code now (then this one waits for its figure, unless the
        executor is closing or nothing caches figures); otherwise this job claims it. A job puts its figure in the
        cache before it releases its claim (``_work``), so one that claims next and then reads the cache finds it."""
        if not okey or self.cache is None or not self.engine.params.cache:
            return False
        with self._lock:
            if okey in self._objects and not self._closing:
                return True
            self._objects.add(okey)
            return False

    def _release_object(self, owned: list[str]) -> None:
        with self._lock:
            for okey in owned:
                self._objects.discard(okey)
            owned.clear()

    def submit_on_slot(self, fn: Callable[[tuple[int, ...]], T]) -> Future[T]:
        """Run ``fn(slot_cores)`` on the next free slot, exclusively (e.g. a reference measurement)."""
        fut: Future[T] = Future()
        self._queue.put((fn, None, fut))
        return fut

    def submit_best_on_slot(self, fn: Callable[[tuple[int, ...]], T], runs: int,
                            key: Callable[[T], float]) -> Future[T]:
        """The highest by ``key`` (its figure) of ``runs`` results ``fn(slot_cores)`` returns, each
        taken exclusively on a free slot and apart in time as a kernel's fresh runs are (each next run waits behind
        the queued work): for a reference measurement, where one taken in a slow phase of the shared host would skew
        every figure compared with it. Ties keep the first."""
        if runs < 1:
            raise ValueError(f"submit_best_on_slot: runs={runs} must be >= 1")
        taken: list[T] = []

        def job(slot: tuple[int, ...]) -> T | _Again:
            taken.append(fn(slot))
            return _AGAIN if len(taken) < runs else max(taken, key=key)
        return cast("Future[T]", self.submit_on_slot(job))

    async def submit_async(self, completion: str | bytes, n: int | None = None) -> BenchResult:
        return await asyncio.wrap_future(self.submit(completion, n))

    def map(self, completions: Iterable[str | bytes], n: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> list[BenchResult]:
        """Benchmark a batch; results in input order (``map_in_order``)."""
        return map_in_order(self, completions, n, progress)

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, key, fut = item
            result, error = None, None
            try:
                # the first slot free machine-wide: other engine processes on this host queue for the same cores
                while True:
                    with self.engine.locks.hold_any(self.slots) as (slot, _):
                        result = fn(slot)
                    if not isinstance(result, _Again) or self._requeue(item):
                        break
                if isinstance(result, _Again):  # its next fresh run waits in the queue
                    continue
                own_object = isinstance(result, BenchResult) and bool(result.object_key) \
                    and "same_object" not in result.extra  # timed here: its job claimed the object key
                try:
                    if key is not None and self.cache is not None and self.engine.params.cache \
                            and result.status is not Status.TIMEOUT:
                        self.cache.put(result)
                        if own_object:
                            self.cache.put(dataclasses.replace(result, key=result.object_key,
                                                               extra={**result.extra, "timed_as": result.key}))
                finally:
                    if own_object:
                        self._release_object([result.object_key])
            except BaseException as err:  # infrastructure faults travel to the caller, never become rewards
                error = err
            # the bookkeeping is done before the caller wakes: one who reads ``completed`` after its result sees it
            with self._lock:
                if key is not None:
                    self._inflight.pop(key, None)
                self.completed += 1
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result)

    def _requeue(self, item: tuple) -> bool:
        """Queue a job's next fresh run behind the waiting work (at most ``SPACING_PER_SLOT`` jobs per slot); False
        once closing (the worker runs it now, so no job is left behind the workers' stop marks)."""
        with self._lock:
            if self._closing:
                return False
            self._queue.put_behind(item, SPACING_PER_SLOT * len(self.slots))
            return True

    def close(self) -> None:
        with self._lock:
            self._closing = True
            for _ in self._workers:
                self._queue.put(_STOP)
        for w in self._workers:
            w.join()

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

