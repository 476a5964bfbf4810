"""Which process owns something, and whether that process still lives: for MLflow runs left RUNNING by a crash.

A process is named by its host, its pid and its start time (clock ticks since boot, field 22 of
``/proc/<pid>/stat``): after a crash the kernel may give the same pid to another process, and only the start time
tells the two apart. Whether a process lives can only be known on its own host; elsewhere the answer is ``None``.

Test: ``pytest tests/test_processes.py``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessId:
    """One process, as recorded by the process itself.

    Attributes:
        host: ``socket.gethostname()`` of its machine.
        pid: its process id.
        start: its start time in clock ticks since boot; ``""`` where ``/proc`` is missing (then the pid alone).
    """

    host: str
    pid: int
    start: str = ""


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` is field 3 of proc(5), the state; ``[1]``
    the parent pid; ``[19]`` the start time), or None when there is no such process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time) of ``pid`` from ``/proc``, or None when there is no such process."""
    fields = stat_fields(pid)
    return None if fields is None else (fields[0], fields[19])  # fields 3 (state) and 22 (starttime) of proc(5)


def this_process() -> ProcessId:
    """The calling process."""
    stat = _stat(os.getpid())
    return ProcessId(socket.gethostname(), os.getpid(), stat[1] if stat else "")


def is_alive(process: ProcessId) -> bool | None:
    """Whether ``process`` still runs: True or False on its own host, None on any other (it cannot be known here).

    A zombie (exited, not yet reaped) counts as dead, and so does a live process whose start time differs from the
    recorded one: the pid was given to another process.
    """
    if process.host != socket.gethostname():
        return None
    if Path("/proc/self/stat").is_file():
        stat = _stat(process.pid)
        if stat is None or stat[0] in ("Z", "X"):
            return False
        return not process.start or stat[1] == process.start
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True
