"""The host's speed during a timed run, judged by the monitor's speed probe against the node's reference.

On a shared VM the host's other tenants slow every kernel by up to 2x for hundreds of milliseconds, and nothing
in ``/proc/stat`` shows it (no steal, no foreign load). The monitor therefore times a fixed, cache-resident
64 x 64 matrix product (its speed probe) right before every timed call, while the kernel's process is stopped.
``HostSpeed`` keeps the node's reference for one matrix size and says, per call, whether the host ran at full
speed (probe within ``bench.timing.probe_tolerance`` of the reference). The engine takes its figure from those
calls; a run with too few of them is ``disturbed``.

The reference is the full-speed probe of the recent runs, not the fastest probe ever seen. Each run contributes
its lower-quartile probe (its second-fastest when it has fewer than eight: one fast glitch never counts); the node
remembers the last ``HISTORY`` runs' figures in a small file per node and size in the cache folder, shared by every
engine process, and the reference is their ``REF_QUANTILE`` (the lowest figure while fewer than ``MIN_HISTORY``
runs are known). An all-time minimum only ever falls: measured here (docs/bench.md), one run's lucky probe set a
reference 13% below the host's usual full-speed probe, after which 59 of every 60 runs were judged disturbed on a host
that was no slower, and each of them waited out the gate. Slow phases that fill fewer than nine in ten of the
remembered runs do not move the reference; a host that stays slower for longer is the node's speed now.

Test: ``pytest tests/bench/test_speed.py``.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HISTORY = 256  # run figures remembered per node and size
MIN_HISTORY = 16  # until this many runs are known, the reference is the lowest run figure
REF_QUANTILE = 0.1  # the reference: this quantile of the remembered run figures


def run_figure(probes: Sequence[float]) -> float | None:
    """A run's full-speed probe: its lower quartile, at least its second-fastest (one glitch of the clock is never
    believed); None for fewer than two probes."""
    seen = sorted(p for p in probes if p > 0)
    if len(seen) < 2:
        return None
    return seen[max(1, (len(seen) - 1) // 4)]


def _reference(figures: Sequence[float]) -> float | None:
    if not figures:
        return None
    ordered = sorted(figures)
    if len(ordered) < MIN_HISTORY:
        return ordered[0]
    return ordered[int(REF_QUANTILE * (len(ordered) - 1))]


@dataclass(frozen=True)
class SpeedVerdict:
    """Per timed call, whether the host ran at full speed; and the run's median probe over the reference."""

    clean: tuple[bool, ...]
    slowdown: float


class HostSpeed:
    """The node's speed-probe reference (from the run figures persisted in ``path``) and the verdict on each run's
    probes."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._ref: float | None = _reference(self._load())

    def _load(self) -> list[float]:
        """The remembered run figures; a file of the former layout (one all-time minimum) counts as none."""
        try:
            runs = json.loads(self.path.read_text())["runs"]
            return [float(x) for x in runs if float(x) > 0][-HISTORY:]
        except (OSError, ValueError, KeyError, TypeError):
            return []

    @property
    def reference(self) -> float | None:
        """Seconds of the speed probe at full host speed on this node (None before the first run)."""
        return self._ref

    def limit(self, tolerance: float) -> float | None:
        """Probe seconds up to which a call counts as made at full speed (None: no reference yet)."""
        ref = self._ref
        return ref * (1.0 + tolerance) if ref else None

    def judge(self, probes: Sequence[float], tolerance: float) -> SpeedVerdict:
        """Judge a run's probes (one per timed call) after adding the run's figure to the node's history."""
        seen = [p for p in probes if p > 0]
        figure = run_figure(seen)
        if figure is not None:
            self._record(figure)
        ref = self._ref or (min(seen) if seen else None)
        if not ref or len(probes) == 0:
            return SpeedVerdict(tuple(True for _ in probes), 1.0)
        ordered = sorted(probes)
        median = ordered[len(ordered) // 2]
        return SpeedVerdict(tuple(p <= ref * (1.0 + tolerance) for p in probes), median / ref)

    def _record(self, figure: float) -> None:
        """Append a run figure to the shared history (read, append, replace, under an exclusive lock on a
        sibling file, so that engine processes never drop each other's figures) and recompute the reference."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path.with_suffix(".lock"), "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                runs = [*self._load(), figure][-HISTORY:]
                tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
                tmp.write_text(json.dumps({"probe_s": _reference(runs), "runs": runs}))
                os.replace(tmp, self.path)
            self._ref = _reference(runs)
