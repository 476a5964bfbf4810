"""Step 4: run a linked kernel under the project's monitor, outside the kernel's address space.

The engine starts the monitor (``csrc/monitor.c``, compiled once per node) in its own session and process group;
the monitor forks the kernel's process (``csrc/runner.c`` linked with the kernel), isolates it before exec (PID,
mount, network and IPC namespaces where the host allows; a read-only file system with an empty private tmpfs as
its working directory; an unprivileged user; rlimits; the slot's cores; no_new_privs), and the runner installs a
seccomp filter. The monitor owns the inputs, the clock, the checks and the report, which travels on a pipe at
fd 3 that the kernel's process never holds; stdout and stderr of both go to a size-limited log. On timeout the
whole process group is killed; the kernel's process also dies with its monitor (PDEATHSIG), so no process
survives its job. ``probe_isolation`` says once per process which mechanisms the host allows.

Test: ``pytest tests/bench/test_sandbox.py tests/bench/test_tamper.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import resource
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from hpcrl_core.bench.cpuload import busy_ticks, foreign_load
from hpcrl_core.config import SandboxParams
from hpcrl_core.errors import BenchInfraError

CHANNEL_FD = 3
_PAYLOAD_LIMIT = 1 << 20
_RESET_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGXCPU, signal.SIGINT, signal.SIGTERM)
_GRACE_S = 10.0  # the monitor enforces the run's limit itself; this is the engine's safety net beyond it

# What a fully isolated run has, and what each missing mechanism means for a user reading a result.
MECHANISMS: dict[str, str] = {
    "seccomp": "the kernel's process could make any system call (exec, open, socket, ...)",
    "pidns": "the kernel's process could see and signal other processes of its user",
    "netns": "the kernel's process could reach the network",
    "readonly-fs": "the kernel's process could write wherever its user may (e.g. /tmp)",
    "private-tmpfs": "the kernel's process has no private scratch (its working folder is read-only)",
    "unprivileged-user": "the kernel's process runs as the engine's own user",
    "no-new-privs": "the kernel's process could gain privileges through setuid programs",
}


@dataclass(frozen=True)
class Isolation:
    """The isolation mechanisms this host allows for the kernel's process (``monitor probe``)."""

    names: tuple[str, ...]

    @property
    def missing(self) -> dict[str, str]:
        """Expected mechanisms the host refused, each with what its absence means."""
        return {k: v for k, v in MECHANISMS.items() if k not in self.names}

    @property
    def user_dropped(self) -> bool:
        return "unprivileged-user" in self.names


@dataclass(frozen=True)
class RunOutcome:
    """How the monitor ended.

    Attributes:
        kind: ``exited``, ``signaled`` or ``timeout`` (of the monitor itself; the kernel's fate is in payload).
        code: exit code (exited) or signal number (signaled).
        payload: the monitor's report on the result channel.
        output: the head of the log (the kernel's process's stdout and stderr, the monitor's messages).
        wall_s: wall seconds from spawn to reap.
        cpu_s: CPU seconds of the monitor and the kernel's process.
        foreign_load: share of the slot used by others meanwhile (None if unmeasurable).
    """

    kind: str
    code: int
    payload: bytes
    output: str
    wall_s: float
    cpu_s: float
    foreign_load: float | None


def sandbox_ids(user: str) -> tuple[int, int] | None:
    """(uid, gid) to drop the kernel's process to: only when running as root and the user exists."""
    if os.geteuid() != 0 or not user:
        return None
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        return None
    return pw.pw_uid, pw.pw_gid


def _id_args(user: str) -> list[str]:
    ids = sandbox_ids(user)
    return [f"uid={ids[0]}", f"gid={ids[1]}"] if ids else []


@lru_cache(maxsize=8)
def probe_isolation(monitor: Path, namespaces: bool, user: str) -> Isolation:
    """Ask the monitor which isolation this host allows (its child's setup, without the exec).

    Raises:
        BenchInfraError: the monitor does not run.
    """
    with tempfile.TemporaryDirectory(prefix="hpcrl-probe-") as d:
        os.chmod(d, 0o755)
        (Path(d) / "tmp").mkdir(mode=0o755)
        argv = [str(monitor), "probe", f"ns={int(namespaces)}", f"work={d}", *_id_args(user)]
        try:
            res = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
            report = json.loads(res.stdout)
        except (OSError, ValueError, subprocess.TimeoutExpired) as err:
            raise BenchInfraError(f"the benchmark monitor {monitor} does not run: {err}") from err
    names = [n for n in report.get("isolation", []) if isinstance(n, str)]
    return Isolation(tuple(["affinity", *names]))


def omp_env(cores: Sequence[int]) -> dict[str, str]:
    """OpenMP settings matching a slot: as many threads as cores and a hard thread limit.

    Threads are not bound to places: binding would need ``sched_setaffinity``, which the kernel's process may
    not call (it could widen its CPU set); the process as a whole is confined to the slot's cores.
    """
    k = str(len(cores))
    return {"OMP_NUM_THREADS": k, "OMP_THREAD_LIMIT": k, "OMP_DYNAMIC": "false", "OPENBLAS_NUM_THREADS": "1"}


def _channel_end(w: int) -> int:
    """Keep the write end away from fds 0-3 so that dup2 onto fd 3 really clears close-on-exec."""
    if w > CHANNEL_FD:
        return w
    moved = fcntl.fcntl(w, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(w)
    return moved


def run_monitored(monitor: Path, exe: Path, args: dict[str, str], *, cores: Sequence[int],
                  params: SandboxParams, timeout: float, workdir: Path) -> RunOutcome:
    """Run ``monitor`` on the linked kernel ``exe`` (in ``workdir``; its scratch is ``workdir/tmp``).

    ``args`` are the monitor's measurement arguments (n, sizes, timing, tolerance ...); the sandbox adds the
    isolation and limits from ``params`` and the run's ``timeout``.

    Raises:
        BenchInfraError: the monitor could not be spawned.
    """
    (workdir / "tmp").mkdir(mode=0o755, exist_ok=True)
    argv = [str(monitor), str(CHANNEL_FD), f"runner={exe}", f"work={workdir}",
            f"cores={','.join(map(str, cores))}", f"ns={int(params.namespaces)}", f"timeout={timeout!r}",
            f"mem_mb={params.memory_mb}", f"cpu_s={params.cpu_s}", f"file_mb={params.file_mb}",
            f"nofile={params.open_files}", f"nproc={params.processes}", *_id_args(params.user),
            *(f"{k}={v}" for k, v in args.items())]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C", **omp_env(cores)}
    r, w = os.pipe()
    w = _channel_end(w)
    log = workdir / "output.log"
    actions = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
               (os.POSIX_SPAWN_DUP2, 1, 2), (os.POSIX_SPAWN_DUP2, w, CHANNEL_FD)]
    before = busy_ticks(cores)
    t0 = time.monotonic()
    try:
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True, setsigdef=_RESET_SIGNALS)
    except OSError as err:
        os.close(r)
        os.close(w)
        raise BenchInfraError(f"cannot start the benchmark monitor ({argv[0]}): {err}") from err
    os.close(w)
    payload, timed_out = _read_channel(r, t0 + timeout + _GRACE_S)
    try:
        reaped = _reap(pid, time.monotonic() + (0.0 if timed_out else _GRACE_S))
        timed_out = timed_out or reaped is None
        status, usage = reaped if reaped is not None else _kill_and_reap(pid)
    finally:
        os.close(r)
        _killpg(pid)  # nothing of the job may outlive it
    wall = time.monotonic() - t0
    cpu = usage.ru_utime + usage.ru_stime
    load = foreign_load(before, busy_ticks(cores), cpu, wall)
    output = _log_head(log)
    if timed_out:
        return RunOutcome("timeout", 0, payload, output, wall, cpu, load)
    if os.WIFSIGNALED(status):
        return RunOutcome("signaled", os.WTERMSIG(status), payload, output, wall, cpu, load)
    return RunOutcome("exited", os.WEXITSTATUS(status), payload, output, wall, cpu, load)


def _read_channel(r: int, deadline: float) -> tuple[bytes, bool]:
    """Read the result channel until EOF or the deadline; (payload head, timed out)."""
    payload = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return bytes(payload), True
        ready, _, _ = select.select([r], [], [], min(left, 1.0))
        if ready:
            chunk = os.read(r, 65536)
            if not chunk:
                return bytes(payload), False
            if len(payload) < _PAYLOAD_LIMIT:
                payload += chunk


def _log_head(log: Path) -> str:
    try:
        with log.open("rb") as f:
            return f.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _reap(pid: int, deadline: float) -> tuple[int, resource.struct_rusage] | None:
    """Wait for the process until ``deadline``; None if it is still running then."""
    delay = 0.0005
    while True:
        got, status, usage = os.wait4(pid, os.WNOHANG)
        if got == pid:
            return status, usage
        if time.monotonic() >= deadline:
            return None
        time.sleep(delay)
        delay = min(delay * 2, 0.02)


def _kill_and_reap(pid: int) -> tuple[int, resource.struct_rusage]:
    _killpg(pid)
    _, status, usage = os.wait4(pid, 0)
    return status, usage
