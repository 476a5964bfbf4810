"""The host's speed during a timed run, judged by the monitor's speed probe against the node's best.

On a shared VM the host's other tenants slow every kernel by up to 2x for hundreds of milliseconds, and nothing
in ``/proc/stat`` shows it (no steal, no foreign load). The monitor therefore times a fixed, cache-resident
64 x 64 matrix product (its speed probe, ~20 us) right before every timed call, while the kernel's process is
stopped. ``HostSpeed`` keeps the node's reference for one matrix size (noise only ever adds time, so the reference
is the lowest second-fastest probe of any run, in a small file per node and size in the cache folder, shared by
every engine process) and says, per call, whether the host ran at full speed (probe within
``bench.timing.probe_tolerance`` of the reference). The engine takes its figure from those calls; a run with too
few of them is ``disturbed``. A run before any reference exists is judged against its own fastest probe.

Measured on this VM (docs/bench.md): across 8 fresh runs the 10th-percentile figure of all calls spread 16-65%,
that of the full-speed calls 2-3%.

Test: ``pytest tests/bench/test_speed.py``.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


def _second_fastest(xs: Sequence[float]) -> float | None:
    """Robust to one glitch of the clock, unlike the minimum; None for fewer than two probes."""
    ys = sorted(xs)
    return ys[1] if len(ys) >= 2 else None


@dataclass(frozen=True)
class SpeedVerdict:
    """Per timed call, whether the host ran at full speed; and the run's median probe over the reference."""

    clean: tuple[bool, ...]
    slowdown: float


class HostSpeed:
    """The node's speed-probe reference (persisted in ``path``) and the verdict on each run's probes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ref: float | None = self._load()

    def _load(self) -> float | None:
        try:
            value = float(json.loads(self.path.read_text())["probe_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return value if value > 0 else None

    @property
    def reference(self) -> float | None:
        """Seconds of the speed probe at full host speed on this node (None before the first run)."""
        return self._ref

    def limit(self, tolerance: float) -> float | None:
        """Probe seconds up to which a call counts as made at full speed (None: no reference yet)."""
        ref = self._ref
        return ref * (1.0 + tolerance) if ref else None

    def judge(self, probes: Sequence[float], tolerance: float) -> SpeedVerdict:
        """Judge a run's probes (one per timed call) and lower the node's reference if this run saw it faster."""
        seen = [p for p in probes if p > 0]
        candidate = _second_fastest(seen)
        if candidate is not None:
            self._offer(candidate)
        ref = self._ref or (min(seen) if seen else None)
        if not ref or len(probes) == 0:
            return SpeedVerdict(tuple(True for _ in probes), 1.0)
        ordered = sorted(probes)
        median = ordered[len(ordered) // 2]
        return SpeedVerdict(tuple(p <= ref * (1.0 + tolerance) for p in probes), median / ref)

    def _offer(self, candidate: float) -> None:
        with self._lock:
            current = self._load() or self._ref  # another process may have found a faster one
            if current is not None and current <= candidate:
                self._ref = current
                return
            self._ref = candidate
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            tmp.write_text(json.dumps({"probe_s": candidate}))
            os.replace(tmp, self.path)
