"""CPU load of other processes on a set of cores, from /proc/stat, for judging whether a timed run was disturbed.

``foreign = (busy ticks on the slot's cores - CPU seconds of our own child) / (wall * cores)``. Steal time counts
as busy: a hypervisor taking the core disturbs a timing as much as a neighbour process does.

Test: ``pytest tests/bench/test_node.py`` (foreign-load arithmetic).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_STAT = Path("/proc/stat")


def busy_ticks(cores: Sequence[int], stat_text: str | None = None) -> dict[int, int]:
    """Busy ticks (user+nice+system+irq+softirq+steal) per core; empty when /proc/stat is unreadable."""
    if stat_text is None:
        try:
            stat_text = _STAT.read_text()
        except OSError:
            return {}
    wanted = set(cores)
    out: dict[int, int] = {}
    for line in stat_text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        parts = line.split()
        try:
            cpu = int(parts[0][3:])
        except ValueError:
            continue
        if cpu in wanted:
            v = [int(x) for x in parts[1:9]] + [0] * max(0, 8 - len(parts[1:9]))
            user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
            out[cpu] = user + nice + system + irq + softirq + steal
    return out


def foreign_load(before: dict[int, int], after: dict[int, int], own_cpu_s: float, wall_s: float) -> float | None:
    """Share of the cores' capacity used by others during ``wall_s``; None when it cannot be measured.

    One tick of slack per core absorbs the counters' granularity.
    """
    cores = [c for c in before if c in after]
    if not cores or wall_s <= 0:
        return None
    busy_s = sum(after[c] - before[c] for c in cores) / _HZ
    slack_s = len(cores) / _HZ
    return max(0.0, busy_s - own_cpu_s - slack_s) / (wall_s * len(cores))
