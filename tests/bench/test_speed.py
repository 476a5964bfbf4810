"""The host-speed judgement: the node's probe reference (a low quantile of the recent runs' figures, persisted and
shared between processes, never one lucky run) and which calls count as made at full speed; the clean-share rule
that marks a run disturbed.

Run: pytest tests/bench/test_speed.py
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from hpcrl_core.bench.engine import full_speed_time, quantile
from hpcrl_core.bench.speed import HISTORY, MIN_HISTORY, HostSpeed, run_figure
from hpcrl_core.config import TimingParams


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


def test_a_run_figure_is_its_lower_quartile_and_never_one_glitch() -> None:
    assert run_figure([5e-6]) is None
    assert run_figure([1e-6, 9e-6, 9e-6]) == 9e-6  # the second-fastest of a short run
    probes = [1e-6] + [6e-6] * 10 + [9e-6] * 9  # one glitch, ten full-speed calls, nine slow ones
    assert run_figure(probes) == 6e-6


def test_one_lucky_run_does_not_move_a_known_reference(tmp_path: Path) -> None:
    """The defect this replaced: the all-time minimum fell with one lucky run, then every run was 'disturbed'."""
    hs = HostSpeed(tmp_path / "speed.json")
    for i in range(MIN_HISTORY + 4):
        hs.judge([6.0e-6 + 0.01e-6 * (i % 3)] * 12, 0.10)
    ref = hs.reference
    assert ref is not None and abs(ref - 6.0e-6) < 0.02e-6
    hs.judge([5.0e-6] * 12, 0.10)  # one run 17% faster than any other
    assert hs.reference == ref
    v = hs.judge([6.1e-6] * 12, 0.10)  # the host's usual full speed stays clean
    assert all(v.clean)


def test_slow_phases_do_not_raise_the_reference_but_a_lasting_change_does(tmp_path: Path) -> None:
    hs = HostSpeed(tmp_path / "speed.json")
    for i in range(100):  # a noisy spell: most runs slow, one in five at full speed
        hs.judge([6e-6 if i % 5 == 0 else 9e-6] * 12, 0.10)
    assert hs.reference == 6e-6
    for _ in range(HISTORY):  # the host stays 1.5x slower for a whole window: that is its speed now
        hs.judge([9e-6] * 12, 0.10)
    assert hs.reference == 9e-6
    saved = json.loads((tmp_path / "speed.json").read_text())
    assert len(saved["runs"]) == HISTORY and saved["probe_s"] == 9e-6


def test_a_reference_file_of_the_former_layout_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "speed.json"
    path.write_text(json.dumps({"probe_s": 1e-9}))  # a ratcheted all-time minimum
    hs = HostSpeed(path)
    assert hs.reference is None
    hs.judge([6e-6] * 8, 0.10)
    assert hs.reference == 6e-6


def _record_many(path: str, value: float, count: int) -> None:
    hs = HostSpeed(Path(path))
    for _ in range(count):
        hs.judge([value] * 8, 0.10)


def test_processes_sharing_the_file_never_drop_each_others_runs(tmp_path: Path) -> None:
    path = tmp_path / "speed.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_record_many, args=(str(path), (6 + i) * 1e-6, 25)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    runs = json.loads(path.read_text())["runs"]
    assert sorted(set(runs)) == [6e-6, 7e-6, 8e-6, 9e-6] and len(runs) == 100


@pytest.mark.parametrize(("clean", "busy", "from_clean"), [
    ([True] * 20, False, True),
    ([True] * 5 + [False] * 15, False, True),  # exactly a quarter at full speed
    ([True] * 4 + [False] * 16, True, True),  # enough for a figure, too few a share: disturbed, figure still theirs
    ([True] * 2 + [False] * 18, True, False),  # fewer than min_reps: the figure comes from all calls
])
def test_a_run_with_a_small_share_of_full_speed_calls_is_disturbed(clean: list[bool], busy: bool,
                                                                   from_clean: bool) -> None:
    timing = TimingParams(min_reps=3, quantile=0.0, min_clean_share=0.25)
    times = [2.0 if ok else 1.0 for ok in clean]  # slow-phase calls listed as faster, to tell the sources apart
    fast, disturbed = full_speed_time(times, clean, timing)
    assert disturbed is busy
    assert fast == (2.0 if from_clean else 1.0)
