"""The ``agents`` benchmark backend: kernels timed by CPU agents (``hpcrl agent``) through Prefect task runs.

Same interface as ``LocalExecutor`` (``submit`` / ``submit_async`` / ``map`` / ``close``), same results: each kernel
is benchmarked by an agent's local engine with the client's engine params, so its cache key is the one a local run
on that node has. Choose it with ``HPCRL_BENCH_BACKEND=agents`` (or ``hpcrl bench --backend agents``).

Prefect's server does not reschedule a task run whose worker died after taking it, so this backend owns delivery:

- Kernels travel in bundles: one Prefect task run carries up to ``agents_bundle`` kernels (a task run costs about
  half a second of server, result-store and task-engine time whatever it carries: docs/agents.md), the queue
  split evenly over the free slots, so a lone kernel still goes alone and at once.
- It places every run: each agent serves the task under its own key (``tasks/bench_agent.agent_task``), and a run
  goes to the live agent with the most free slots, never more runs to an agent than it has slots. So a run it
  submitted is running, or about to, and a run's deadline can count from its submission.
- A kernel whose run failed for a fault of the machinery, crashed, or went to an agent whose heartbeat stopped
  (``tasks/bench_agent.py``) is submitted again; so is one past its deadline (compile + run timeouts of every
  timed attempt, plus slack, for each kernel of the run). At most ``resubmits`` times, then its future gets a
  ``BenchInfraError``.
- A kernel the backend already has a figure for in this process (same request key, ``bench.cache`` on) is answered
  at once, marked cached, by the local executor's rule: a disturbed figure goes back to an agent until it has
  been measured ``MAX_MEASUREMENTS`` times (the agent's cache keeps the best). An agent's cache hit would still
  cost a task run.
- One result per kernel: the first attempt to complete sets it, keyed by the request key (normalised code, n,
  slot size, engine params); a slow agent's late answer is ignored. A kernel's own failure is a result, never
  retried.
- No live agent for ``HPCRL_AGENTS_WAIT_S`` seconds: a ``BenchInfraError`` that says so, not a hang.

Test: ``pytest tests/tasks/test_agents_backend.py``; with a server and two agents:
``pytest -m integration tests/tasks/test_agents.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from hpcrl_core.bench.executor import map_in_order, measure_again, register_backend
from hpcrl_core.bench.extract import extract_code, normalise_code
from hpcrl_core.bench.result import BenchResult, Status, failure
from hpcrl_core.config import BenchParams, Settings
from hpcrl_core.errors import BenchInfraError
from tasks.agents_server import api_url, check_server, read_agents
from tasks.bench_agent import HEARTBEAT_S, agent_task, result_storage

FINAL_OK = "COMPLETED"
SLACK_S = 30.0  # slot waits, delivery and result storage on top of a kernel's own timeouts
MEMO_SIZE = 50_000  # figures this process keeps by request key (a few hundred bytes each)


def request_key(code: str, n: int, cores_per_slot: int, bench: BenchParams) -> str:
    """The identity of a kernel request, the same on every node: normalised code, n, slot size, engine params."""
    h = hashlib.sha256()
    for part in (normalise_code(code), str(n), str(cores_per_slot), bench.model_dump_json()):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def kernel_budget_s(bench: BenchParams) -> float:
    """How long one kernel may take on an agent before it counts as lost: its compile (once: its fresh runs time one
    build) and every timed attempt's timeouts."""
    t = bench.timing
    return bench.compile_timeout_s + t.fresh_runs * (1 + t.disturbed_retries) * bench.run_timeout_s + SLACK_S


def bundle_size(queued: int, free_slots: int, cap: int) -> int:
    """Kernels the next task run carries: the queue split evenly over the free slots, at most ``cap``."""
    return max(1, min(cap, math.ceil(queued / max(free_slots, 1))))


@dataclass
class Entry:
    """One kernel: its request, its future, the runs that carried it and the faults they met."""

    key: str
    kernel: dict[str, Any]  # completion, n, key
    future: Future[BenchResult]
    attempts: list[str] = field(default_factory=list)
    faults: list[str] = field(default_factory=list)


@dataclass
class Run:
    """One task run the backend submitted: the kernels it carries, in order, the agent it went to and when."""

    run_id: str
    entries: list[Entry]
    agent: str
    submitted: float


class AgentsExecutor:
    """See the module docstring. Use as a context manager, or call ``close()``.

    Args:
        bench: the engine params every agent uses for these kernels (``bench.for_many(n)`` for rewards).
        settings: ``agents_wait_s`` (how long to wait for a live agent), ``agents_resubmits`` and
            ``agents_bundle`` (kernels per task run at most).
        cores_per_slot: slot size of the timed runs (default ``bench.executor.cores_per_slot``).
        reference: ask each agent for its node's reference figure of this kind (``reward.reference``) with every
            verified kernel (``extra["node_reference_gflops"]``), for rewards relative to the node that timed it.
        poll_s: how often the run states are read.
    """

    def __init__(self, bench: BenchParams, settings: Settings, cores_per_slot: int | None = None, *,
                 reference: str | None = None, reference_ttl_s: float = 600.0, poll_s: float = 0.05) -> None:
        from prefect.client.orchestration import get_client

        self.url = api_url()
        check_server(self.url)
        self.bench = bench
        self.cores_per_slot = cores_per_slot or bench.executor.cores_per_slot
        self.wait_s, self.resubmits, self.bundle = settings.agents_wait_s, settings.agents_resubmits, \
            settings.agents_bundle
        self.node_reference, self.reference_ttl_s, self.poll_s = reference, reference_ttl_s, poll_s
        self.budget_s = kernel_budget_s(bench)
        # the engine params every request carries: this slot size, the agent's own cores
        executor = bench.executor.model_copy(update={"cores_per_slot": self.cores_per_slot, "cores": ()})
        self._agent_bench = bench.model_copy(update={"executor": executor}).model_dump(mode="json")
        self.store = result_storage()[1]
        self.completed = 0
        self.resubmitted = 0
        self._client = get_client(sync_client=True)
        self._client.__enter__()
        self._lock = threading.Lock()
        self._entries: dict[str, Entry] = {}  # unfinished kernels by request key
        self._queue: list[Entry] = []  # not yet submitted (again)
        self._runs: dict[str, Run] = {}  # outstanding runs by id
        self._agents: list[dict[str, Any]] = []
        self._foreign: list[dict[str, Any]] = []  # live agents of this slot size on another result store
        self._tasks: dict[str, Any] = {}  # agent id -> the task as that agent serves it
        self._memo: OrderedDict[str, BenchResult] = OrderedDict()  # request key -> the figure that came back
        self._agents_read = 0.0
        self._no_agent_since: float | None = None
        self._stop = threading.Event()
        self.agents = self._wait_for_agents()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="agents-backend")
        self._thread.start()

    # -- the LocalExecutor interface ---------------------------------------------------------------------------
    def submit(self, completion: str | bytes, n: int | None = None) -> Future[BenchResult]:
        """Queue one completion; returns a future of its result (at once)."""
        n = n or self.bench.n
        ex = extract_code(completion, self.bench.max_code_bytes)
        if ex.code is None:  # as the engine answers it, without a round trip
            done: Future[BenchResult] = Future()
            done.set_result(failure(Status.FORMAT_VIOLATION, ex.error or "no code", n=n))
            return done
        key = request_key(ex.code, n, self.cores_per_slot, self.bench)
        with self._lock:
            hit = self._memo.get(key)
            if hit is not None and not measure_again(hit):
                self._memo.move_to_end(key)
                answered: Future[BenchResult] = Future()
                answered.set_result(dataclasses.replace(hit, cached=True))
                return answered
            if key in self._entries:
                return self._entries[key].future
            text = completion if isinstance(completion, str) else completion.decode("utf-8", "replace")
            entry = Entry(key, {"completion": text, "n": n, "key": key}, Future())
            self._entries[key] = entry
            self._queue.append(entry)
            return entry.future

    async def submit_async(self, completion: str | bytes, n: int | None = None) -> BenchResult:
        return await asyncio.wrap_future(self.submit(completion, n))

    def map(self, completions: Iterable[str | bytes], n: int | None = None,
            progress: Callable[[int, int], None] | None = None) -> list[BenchResult]:
        """Benchmark a batch; results in input order (``map_in_order``)."""
        return map_in_order(self, completions, n, progress)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            left = list(self._entries.values())
        self._fail(left, BenchInfraError("the agents backend was closed before this kernel's result came back"))
        self._client.__exit__(None, None, None)

    def __enter__(self) -> AgentsExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- delivery ----------------------------------------------------------------------------------------------
    def _live(self, force: bool = False) -> list[dict[str, Any]]:
        """Live agents with this slot size on this result store (read at most every half heartbeat). An agent that
        reads requests from another store could never see ours."""
        now = time.monotonic()
        if force or now - self._agents_read > HEARTBEAT_S / 2:
            sized = [a for a in read_agents(self._client)
                     if a["live"] and int(a.get("cores_per_slot", 0)) == self.cores_per_slot]
            self._agents = [a for a in sized if a.get("result_store") == self.store]
            self._foreign = [a for a in sized if a.get("result_store") != self.store]
            self._agents_read = now
        return self._agents

    def _wait_for_agents(self) -> list[dict[str, Any]]:
        deadline = time.monotonic() + self.wait_s
        while True:
            live = self._live(force=True)
            if live:
                return live
            if time.monotonic() >= deadline:
                raise BenchInfraError(self._no_agent_message())
            time.sleep(0.5)

    def _no_agent_message(self) -> str:
        message = (f"no CPU agent with {self.cores_per_slot}-core slots has a live heartbeat at {self.url} after "
                   f"{self.wait_s:.0f} s: start one with `hpcrl agent --slots N` (HPCRL_AGENTS_WAIT_S sets the wait)")
        if self._foreign:
            stores = sorted({str(a.get("result_store") or "?") for a in self._foreign})
            message += (f"; {len(self._foreign)} live agent(s) use another result store ({', '.join(stores)}) than "
                        f"this process ({self.store}): point both at the same one (docs/agents.md, results storage)")
        return message

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as err:  # the server went away: every waiting kernel learns it
                self._fail_all(BenchInfraError(f"the agents backend lost the Prefect server at {self.url}: {err}"))
            self._stop.wait(self.poll_s)

    def _step(self) -> None:
        live = self._live()
        now = time.monotonic()
        with self._lock:
            waiting = bool(self._entries)
        if not live and waiting:
            self._no_agent_since = self._no_agent_since or now
            if now - self._no_agent_since > self.wait_s:
                self._fail_all(BenchInfraError(self._no_agent_message()))
                return
        else:
            self._no_agent_since = None
        self._collect(now, live)
        self._dispatch(live)

    def _dispatch(self, live: list[dict[str, Any]]) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    return
                load: dict[str, int] = {}
                for run in self._runs.values():
                    load[run.agent] = load.get(run.agent, 0) + 1
                free = {str(a["agent"]): int(a.get("slots", 0)) - load.get(str(a["agent"]), 0) for a in live}
                total = sum(f for f in free.values() if f > 0)
                if total <= 0:
                    return
                agent = max(free, key=lambda a: free[a])
                size = bundle_size(len(self._queue), total, self.bundle)
                entries, self._queue = self._queue[:size], self._queue[size:]
            request = {"kernels": [e.kernel for e in entries], "bench": self._agent_bench,
                       "reference": self.node_reference, "reference_ttl_s": self.reference_ttl_s,
                       "nonce": uuid.uuid4().hex}  # one Prefect run per attempt, never a cache hit
            if agent not in self._tasks:
                self._tasks[agent] = agent_task(agent)
            try:
                submitted = self._tasks[agent].apply_async(kwargs={"request": request})
            except OSError as err:  # the request could not be stored: no agent could ever read it
                self._fail(entries, BenchInfraError(f"the result store {self.store} refused this process's request "
                                                    f"({err}): kernels and results pass through it; free space or "
                                                    "fix its path or credentials"))
                continue
            run_id = str(submitted.task_run_id)
            with self._lock:
                for entry in entries:
                    entry.attempts.append(run_id)
                self._runs[run_id] = Run(run_id, entries, agent, time.monotonic())

    def _collect(self, now: float, live: list[dict[str, Any]]) -> None:
        from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterId

        with self._lock:
            run_ids = list(self._runs)
        if not run_ids:
            return
        runs = self._client.read_task_runs(task_run_filter=TaskRunFilter(id=TaskRunFilterId(any_=[
            uuid.UUID(r) for r in run_ids])), limit=len(run_ids))
        alive = {str(a["agent"]) for a in live}
        found = {str(r.id) for r in runs}
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run_id not in found and run is not None and now - run.submitted > HEARTBEAT_S:
                # deleted: an agent drops a run whose parameters it cannot read from its result store
                self._retry(run, f"run {run_id} disappeared from the server (its agent {run.agent} could not read "
                            f"the request from its result store; this process uses {self.store})")
        for task_run in runs:
            run_id, state = str(task_run.id), task_run.state
            run = self._runs.get(run_id)
            if run is None or state is None:
                continue
            deadline = self.budget_s * len(run.entries)
            if state.type.value == FINAL_OK:
                self._finish(run, state)
            elif state.is_final():
                self._retry(run, f"run {run_id} ended {state.type.value}: {state.message or ''}".strip())
            elif run.agent not in alive:
                self._retry(run, f"run {run_id} ({state.type.value}) went to agent {run.agent}, whose heartbeat "
                            "stopped", crash=True)
            elif now - run.submitted > deadline:
                self._retry(run, f"run {run_id} passed its deadline of {deadline:.0f} s", crash=True)

    def _finish(self, run: Run, state: Any) -> None:
        try:
            data = state.result()
            results = [BenchResult.from_dict(r) for r in data["results"]]
            if len(results) != len(run.entries):
                raise ValueError(f"{len(results)} results for {len(run.entries)} kernels")
        except Exception as err:  # the result store lost or refused it, or a foreign answer: a fault of the machinery
            self._retry(run, f"run {run.run_id}: its result could not be read from the result store {self.store}: "
                        f"{err}")
            return
        with self._lock:
            self._runs.pop(run.run_id, None)
            for entry in run.entries:  # a duplicate still running elsewhere is ignored when it answers
                for other in entry.attempts:
                    self._runs.pop(other, None)
                self._entries.pop(entry.key, None)
            self.completed += len(run.entries)
            for entry, result in zip(run.entries, results, strict=True):
                if self.bench.cache:
                    self._memo[entry.key] = result
            while len(self._memo) > MEMO_SIZE:
                self._memo.popitem(last=False)
        for entry, result in zip(run.entries, results, strict=True):
            entry.future.set_result(result)

    def _retry(self, run: Run, fault: str, crash: bool = False) -> None:
        exhausted = []
        with self._lock:
            self._runs.pop(run.run_id, None)
            again = []
            for entry in run.entries:
                entry.faults.append(fault)
                if len(entry.attempts) > self.resubmits:
                    self._entries.pop(entry.key, None)
                    exhausted.append(entry)
                else:
                    again.append(entry)
            self._queue[:0] = again
            self.resubmitted += len(again)
        if crash:
            self._mark_crashed(run.run_id, fault)
        for entry in exhausted:
            entry.future.set_exception(BenchInfraError(f"kernel {entry.key[:12]} got no result after "
                                                       f"{len(entry.attempts)} attempts: " + "; ".join(entry.faults)))

    def _mark_crashed(self, run_id: str, why: str) -> None:
        """A run its agent took with it would show RUNNING forever in the UI: close it as CRASHED."""
        from prefect.states import Crashed

        with contextlib.suppress(Exception):  # else the record stays stale; the kernel is resubmitted either way
            self._client.set_task_run_state(uuid.UUID(run_id), Crashed(message=why), force=True)

    def _fail(self, entries: list[Entry], error: BenchInfraError) -> None:
        with self._lock:
            for entry in entries:
                self._entries.pop(entry.key, None)
        for entry in entries:
            if not entry.future.done():
                entry.future.set_exception(error)

    def _fail_all(self, error: BenchInfraError) -> None:
        with self._lock:
            entries = list(self._entries.values())
            self._queue.clear()
            self._runs.clear()
        self._fail(entries, error)

def agents_executor(bench: BenchParams, settings: Settings, cores_per_slot: int | None = None,
                    reference: str | None = None) -> AgentsExecutor:
    """The ``agents`` entry of ``hpcrl_core.bench.executor.BACKENDS`` (``HPCRL_BENCH_BACKEND=agents``)."""
    return AgentsExecutor(bench, settings, cores_per_slot, reference=reference)


register_backend("agents")(agents_executor)
