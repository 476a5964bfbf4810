"""A CPU agent's benchmarking, without Prefect: the cores it uses, one executor per distinct engine params on
them, the node's reference figures, and one request turned into a result (``bench_request``). The Prefect task
that serves it and the heartbeats are in ``tasks/bench_agent.py``.

A request is a bundle of kernels that share engine params: ``kernels`` (a list of ``completion``, ``n`` and ``key``,
the backend's request key), ``bench`` (a ``BenchParams`` dict, the client's engine params), optionally
``reference`` (a ``reward.reference`` kind) and ``reference_ttl_s``. Its kernels go to the agent's executor at once
and spread over its slots. The answer is ``{"results": [...]}`` in the order of ``kernels``, each
``BenchResult.to_dict()`` with ``extra`` holding the agent, its node (model, fingerprint, 1-slot peak) and, for a
verified kernel when asked, the node's reference figure at the kernel's size.

Test: ``pytest tests/bench/test_agent.py``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hpcrl_core.bench.executor import LocalExecutor, local_executor, make_slots
from hpcrl_core.bench.reference import ReferenceTracker
from hpcrl_core.bench.result import BenchResult
from hpcrl_core.config import BenchParams, Settings
from hpcrl_core.errors import BenchInfraError, ConfigError


def agent_cores(slots: int, cores_per_slot: int, cores: Sequence[int] | None) -> list[int]:
    """The cores an agent with ``slots`` slots of ``cores_per_slot`` uses: the first of ``cores`` (default: this
    process's CPU set).

    Raises:
        ConfigError: not enough cores for the slots asked.
    """
    available = sorted(cores) if cores else sorted(os.sched_getaffinity(0))
    need = slots * cores_per_slot
    if slots < 1 or len(available) < need:
        raise ConfigError(f"--slots {slots} x {cores_per_slot} core(s) per slot needs {need} cores but "
                          f"{len(available)} are available ({available}); lower --slots or list more --cores")
    return available[:need]


@dataclass
class AgentRuntime:
    """What the agent process holds: one executor per distinct engine params, their reference trackers, the task
    runs in flight and the count of kernels done. Thread-safe: the task worker runs tasks as threads."""

    cores: list[int]
    cores_per_slot: int
    settings: Settings
    result_store: str = ""  # where the agent reads requests and writes results, as the backend compares it
    agent_id: str = field(default_factory=lambda: f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}")
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    kernels_done: int = 0
    in_flight: dict[str, list[str]] = field(default_factory=dict)  # task run id -> its kernels' request keys
    references: dict[str, float] = field(default_factory=dict)  # "<kind>@<n>" -> GFLOPS, for the heartbeat
    _executors: dict[str, LocalExecutor] = field(default_factory=dict)
    _trackers: dict[tuple[str, str], ReferenceTracker] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def slots(self) -> list[tuple[int, ...]]:
        return make_slots(self.cores, self.cores_per_slot)

    def executor(self, bench: BenchParams) -> LocalExecutor:
        """The executor of these engine params on the agent's slots (built once; the node's result cache)."""
        key = bench.model_dump_json()
        with self._lock:
            if key not in self._executors:
                self._executors[key] = local_executor(bench, self.settings, self.cores_per_slot, cores=self.cores)
            return self._executors[key]

    def reference(self, bench: BenchParams, kind: str, n: int, ttl_s: float) -> float:
        """This node's reference figure (``reward.reference`` kind) at size n, refreshed by age."""
        ex = self.executor(bench)
        with self._lock:
            tracker = self._trackers.setdefault((bench.model_dump_json(), kind), ReferenceTracker(ex, kind, ttl_s))
        value = tracker.gflops(n)
        with self._lock:
            self.references[f"{kind}@{n}"] = round(value, 3)
        return value

    def run(self, request: dict[str, Any], task_run_id: str) -> dict[str, Any]:
        """Benchmark one request's kernels; ``{"results": [...]}`` in their order, each with the agent and node.

        Raises:
            BenchInfraError: the request is not a bundle this agent understands (a client of another version).
        """
        kernels = request.get("kernels")
        if not isinstance(kernels, list) or not kernels or not all(
                isinstance(k, dict) and "completion" in k and "n" in k for k in kernels):
            raise BenchInfraError("a request without a list of kernels (completion, n, key): the client and this "
                                  "agent run different hpcrl versions")
        bench = BenchParams.model_validate(request["bench"])
        with self._lock:
            self.in_flight[task_run_id] = [str(k.get("key", "")) for k in kernels]
        try:
            ex = self.executor(bench)
            futures = [ex.submit(k["completion"], int(k["n"])) for k in kernels]
            results = []
            for kernel, future in zip(kernels, futures, strict=True):
                results.append(self._answer(ex, bench, request, future.result(), int(kernel["n"])))
                with self._lock:
                    self.kernels_done += 1
            return {"results": results}
        finally:
            with self._lock:
                self.in_flight.pop(task_run_id, None)

    def _answer(self, ex: LocalExecutor, bench: BenchParams, request: dict[str, Any], result: BenchResult,
                n: int) -> dict[str, Any]:
        node = ex.engine.node
        extra = {**result.extra, "agent": self.agent_id, "node": node.model, "node_fingerprint": node.fingerprint,
                 "node_peak_gflops": node.peak_gflops(self.cores_per_slot)}
        kind = request.get("reference")
        if kind and result.ok:
            extra["node_reference"] = kind
            extra["node_reference_gflops"] = self.reference(bench, str(kind), n,
                                                            float(request.get("reference_ttl_s", 600)))
        return {**result.to_dict(), "extra": extra}

    def heartbeat(self, node: dict[str, Any]) -> dict[str, Any]:
        """The record the agent publishes every ``HEARTBEAT_S``."""
        with self._lock:
            return {"agent": self.agent_id, "host": socket.gethostname(), "pid": os.getpid(),
                    "slots": len(self.slots), "cores": self.cores, "cores_per_slot": self.cores_per_slot,
                    "result_store": self.result_store,
                    "node": node, "references": dict(self.references), "started_at": self.started_at,
                    "last_heartbeat": time.time(), "kernels_done": self.kernels_done,
                    "in_flight": sorted(self.in_flight)}

    def close(self) -> None:
        with self._lock:
            executors, self._executors = list(self._executors.values()), {}
        for ex in executors:
            ex.close()


def bench_request(runtime: AgentRuntime, request: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Benchmark one request's kernels on the agent's slots (see the module docstring); ``run_id`` names it in
    flight."""
    return runtime.run(request, run_id)


def node_record(bench: BenchParams, runtime: AgentRuntime) -> dict[str, Any]:
    """The node fingerprint and reference figure an agent reports: CPU model, flags digest, cores, peak estimate
    per slot, numpy's GFLOPS on the agent's first slot at ``bench.n`` (short timing, as rewards use)."""
    many = bench.for_many(bench.n)
    ex = runtime.executor(many)
    node = ex.engine.node
    numpy_gflops = runtime.reference(many, "numpy", bench.n, ttl_s=3600.0)
    return {"model": node.model, "vendor": node.vendor, "fingerprint": node.fingerprint, "cores": node.cores,
            "flops_per_cycle": node.flops_per_cycle, "peak_gflops_per_slot": node.peak_gflops(runtime.cores_per_slot),
            "numpy_gflops": round(numpy_gflops, 3), "n": bench.n, "isolation": list(ex.engine.isolation.names)}
