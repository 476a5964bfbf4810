"""The host-speed judgement: the node's probe reference (persisted, only lowered, shared between processes) and
which calls count as made at full speed.

Run: pytest tests/bench/test_speed.py
"""

from __future__ import annotations

from pathlib import Path

from hpcrl_core.bench.engine import quantile
from hpcrl_core.bench.speed import HostSpeed


def test_first_run_sets_the_reference_and_faster_runs_lower_it(tmp_path: Path) -> None:
    path = tmp_path / "speed.json"
    hs = HostSpeed(path)
    assert hs.reference is None and hs.limit(0.05) is None
    hs.judge([30e-6, 20e-6, 21e-6, 20e-6], 0.05)
    assert hs.reference == 20e-6  # the second-fastest probe
    hs.judge([40e-6] * 20, 0.05)  # a slower run never raises it
    assert hs.reference == 20e-6
    hs.judge([10e-6, 18e-6, 30e-6], 0.05)  # one glitch (10) is not believed
    assert hs.reference == 18e-6
    assert HostSpeed(path).reference == 18e-6  # another process reads it
    assert abs(hs.limit(0.05) - 18.9e-6) < 1e-12


def test_verdict_marks_calls_made_at_full_speed(tmp_path: Path) -> None:
    hs = HostSpeed(tmp_path / "speed.json")
    hs.judge([10e-6] * 3, 0.05)
    v = hs.judge([10e-6, 10.4e-6, 11e-6, 20e-6], 0.05)
    assert v.clean == (True, True, False, False)
    assert abs(v.slowdown - 1.1) < 1e-9  # the median probe (upper median) over the reference


def test_one_probe_never_sets_a_reference(tmp_path: Path) -> None:
    hs = HostSpeed(tmp_path / "speed.json")
    v = hs.judge([5e-6], 0.05)
    assert hs.reference is None
    assert v.clean == (True,)  # judged against the run's own fastest probe meanwhile


def test_quantile_interpolates() -> None:
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.0) == 1.0
    assert quantile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert abs(quantile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0], 0.1) - 2.0) < 1e-12
