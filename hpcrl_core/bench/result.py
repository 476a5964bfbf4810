"""What one benchmark produces: its status and a frozen ``BenchResult``.

Statuses are the failure classes of the reward ladder (most severe first) plus ``ok``. A status is the kernel's
doing; faults of the machinery raise ``BenchInfraError`` instead and never appear here.

Test: ``pytest tests/bench``.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    FORMAT_VIOLATION = "format_violation"
    COMPILE_ERROR = "compile_error"
    TIMEOUT = "timeout"
    RUNTIME_ERROR = "runtime_error"
    WRONG_RESULT = "wrong_result"
    OK = "ok"


@dataclass(frozen=True)
class BenchResult:
    """The outcome of benchmarking one kernel at one size.

    Attributes:
        status: the failure class, or ``ok``.
        detail: human-readable reason (which check failed, compiler message, signal, ...).
        n: matrix size of the timed runs.
        gflops: 2n^3 / (the ``bench.timing.quantile`` of the call times); ``None`` unless ``ok``.
        cv: coefficient of variation of the timed calls; ``None`` unless ``ok``.
        median_s: median seconds per call (``extra["gflops_median"]`` is its figure); ``None`` unless ``ok``.
        reps: number of timed calls.
        techniques: optimisation techniques the static screen detected, sorted.
        isolation: the isolation that was in force for the run (``netns``, ``pidns``, ``uid:nobody``, ...).
        compile_s: seconds spent compiling and linking.
        run_s: wall seconds of the sandboxed run(s).
        foreign_load: share of the slot's CPU used by other processes during the kept run.
        retries: timed runs repeated because foreign load disturbed them.
        disturbed: foreign load stayed above ``bench.timing.max_foreign_load`` after every retry: the figure is
            not trustworthy (the executor measures it again when the kernel comes back; rewards log the share).
        cores: CPU cores of the slot the run owned.
        cached: whether this came from the result cache.
        key: the cache key of (normalised code, n, flags, compiler, harness, node, engine params).
        object_key: the cache key of the compiled kernel object (its bytes, n, slot size, engine params), once it
            was built: kernels with the same machine code share one figure (``Engine.object_key``).
    """

    status: Status
    detail: str = ""
    n: int = 0
    gflops: float | None = None
    cv: float | None = None
    median_s: float | None = None
    reps: int = 0
    techniques: tuple[str, ...] = ()
    isolation: tuple[str, ...] = ()
    compile_s: float = 0.0
    run_s: float = 0.0
    foreign_load: float | None = None
    retries: int = 0
    disturbed: bool = False
    cores: tuple[int, ...] = ()
    cached: bool = False
    key: str = ""
    object_key: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    def respects(self, permitted: Iterable[str]) -> bool:
        """Whether every technique detected in the kernel is in ``permitted`` (rewards, RL and evaluation all use
        this one rule)."""
        return set(self.techniques) <= {str(t) for t in permitted}

    @property
    def node_reference(self) -> float | None:
        """numpy's DGEMM GFLOPS at this result's n on the node that timed it, where that node attached the figure
        (agents do, to verified kernels); None otherwise."""
        value = self.extra.get("node_reference_gflops")
        return None if value is None else float(value)

    def reference(self, fallback: Mapping[int, float]) -> float | None:
        """The numpy figure this result is compared with (rewards and evaluation use this one rule): its node's
        (``node_reference``), else ``fallback`` at its n (a figure measured here, or ``node_references``); None when
        neither has one."""
        own = self.node_reference
        return own if own is not None else fallback.get(self.n)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["status"] = self.status.value
        d["techniques"] = list(self.techniques)
        d["isolation"] = list(self.isolation)
        d["cores"] = list(self.cores)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> BenchResult:
        d = dict(d)
        d["status"] = Status(d["status"])
        for k in ("techniques", "isolation", "cores"):
            d[k] = tuple(d.get(k) or ())
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def node_references(results: Iterable[BenchResult]) -> dict[int, float]:
    """Per size, the median of the node figures (``node_reference``) that results at that size carry; sizes without
    one are left out."""
    by_size: dict[int, list[float]] = {}
    for r in results:
        if (ref := r.node_reference) is not None:
            by_size.setdefault(r.n, []).append(ref)
    return {n: statistics.median(v) for n, v in sorted(by_size.items())}


def failure(status: Status, detail: str, **kw: Any) -> BenchResult:
    """A non-ok result; ``detail`` is truncated to keep logs and caches small."""
    if len(detail) > 2000:
        detail = detail[:1997] + "..."
    return BenchResult(status=status, detail=detail, **kw)
