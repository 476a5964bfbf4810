"""Telling a live process from a dead one, and from a new process that got a dead one's pid.

Run: pytest tests/test_processes.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from hpcrl_core.processes import ProcessId, is_alive, this_process


def test_this_process_lives_and_a_reaped_child_does_not() -> None:
    me = this_process()
    assert me.pid == os.getpid() and is_alive(me) is True
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert is_alive(replace(me, pid=child.pid, start="")) is False


def test_a_zombie_counts_as_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    recorded = ProcessId(this_process().host, child.pid)
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped: a zombie
    try:
        assert is_alive(recorded) is False
    finally:
        child.wait()


def test_a_reused_pid_is_not_the_recorded_process() -> None:
    me = this_process()
    assert me.start  # Linux: /proc gives the start time
    assert is_alive(replace(me, start=str(int(me.start) + 1))) is False


def test_a_process_of_another_host_cannot_be_judged() -> None:
    assert is_alive(replace(this_process(), host="another-node")) is None
