"""Step 4: run a linked benchmark binary in a sandbox.

The binary runs in its own session and process group, pinned to its slot's cores, under rlimits (CPU time,
address space, file size, open files, processes, no core dumps), in a scratch folder, with a minimal environment,
and where the host allows in fresh network and PID namespaces as an unprivileged user (``unshare``). The chosen
isolation is probed once per process and reported with every result. The result travels on a pipe at fd 3, never
on stdout; stdout and stderr go to a size-limited file. On timeout the whole process group (and the PID namespace
with it) is killed, so no process survives its job.

Test: ``pytest tests/bench/test_sandbox.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import resource
import select
import shutil
import signal
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


@dataclass(frozen=True)
class Isolation:
    prefix: tuple[str, ...]  # command prefix that enters the namespaces / drops privileges
    names: tuple[str, ...]  # what is in force, e.g. ("netns", "pidns", "uid:nobody")


@dataclass(frozen=True)
class RunOutcome:
    """How the sandboxed process ended.

    Attributes:
        kind: ``exited``, ``signaled`` or ``timeout``.
        code: exit code (exited) or signal number (signaled).
        payload: bytes the driver wrote on the result channel.
        output: the head of stdout+stderr.
        wall_s: wall seconds from spawn to reap.
        cpu_s: CPU seconds of the process tree.
        foreign_load: share of the slot used by others meanwhile (None if unmeasurable).
    """

    kind: str
    code: int
    payload: bytes
    output: str
    wall_s: float
    cpu_s: float
    foreign_load: float | None


def _works(argv: list[str]) -> bool:
    try:
        pid = os.posix_spawn(argv[0], argv, {"PATH": "/usr/bin:/bin"},
                             file_actions=[(os.POSIX_SPAWN_OPEN, fd, "/dev/null", os.O_RDWR, 0) for fd in (0, 1, 2)])
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0
    except OSError:
        return False


@lru_cache(maxsize=8)
def probe_isolation(namespaces: bool, user: str) -> Isolation:
    """Pick the strongest isolation this host allows (probed by running ``true`` under it)."""
    true = shutil.which("true") or "/bin/true"
    unshare = shutil.which("unshare")
    candidates: list[tuple[list[str], tuple[str, ...]]] = []
    uid_args: list[str] = []
    uid_name: tuple[str, ...] = ()
    if os.geteuid() == 0 and user:
        try:
            pw = pwd.getpwnam(user)
            uid_args, uid_name = ["--setuid", str(pw.pw_uid), "--setgid", str(pw.pw_gid)], (f"uid:{user}",)
        except KeyError:
            pass
    if namespaces and unshare:
        base = [unshare, "--net", "--pid", "--fork", "--kill-child"]
        if os.geteuid() == 0:
            if uid_args:
                candidates.append(([*base, *uid_args, "--"], ("netns", "pidns", *uid_name)))
            candidates.append(([*base, "--"], ("netns", "pidns")))
        else:
            candidates.append(([unshare, "--user", "--map-root-user", *base[1:], "--"], ("userns", "netns", "pidns")))
    setpriv = shutil.which("setpriv")
    if uid_args and setpriv:
        candidates.append(([setpriv, "--reuid", uid_args[1], "--regid", uid_args[3], "--clear-groups", "--"],
                           uid_name))
    for prefix, names in candidates:
        if _works([*prefix, true]):
            return Isolation(tuple(prefix), names)
    return Isolation((), ())


def _limits_prefix(p: SandboxParams) -> list[str]:
    prlimit = shutil.which("prlimit")
    if not prlimit:
        raise BenchInfraError("prlimit not found; install util-linux (make setup)")
    mb = 1024 * 1024
    return [prlimit, f"--as={p.memory_mb * mb}", f"--cpu={p.cpu_s}", f"--fsize={p.file_mb * mb}",
            f"--nofile={p.open_files}", f"--nproc={p.processes}", "--core=0", f"--stack={64 * mb}", "--"]


def omp_env(cores: Sequence[int]) -> dict[str, str]:
    """OpenMP settings matching a slot: as many threads as cores, a hard thread limit, bound to the slot."""
    k = str(len(cores))
    return {"OMP_NUM_THREADS": k, "OMP_THREAD_LIMIT": k, "OMP_DYNAMIC": "false", "OMP_PROC_BIND": "close",
            "OMP_PLACES": ",".join(f"{{{c}}}" for c in cores), "OPENBLAS_NUM_THREADS": "1"}


def _channel_end(w: int) -> int:
    """Keep the write end away from fds 0-3 so that dup2 onto fd 3 really clears close-on-exec."""
    if w > CHANNEL_FD:
        return w
    moved = fcntl.fcntl(w, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(w)
    return moved


def run_sandboxed(exe: Path, args: Sequence[str], *, cores: Sequence[int], params: SandboxParams,
                  timeout: float, workdir: Path) -> RunOutcome:
    """Run ``exe FD args...`` sandboxed; see the module docstring.

    Raises:
        BenchInfraError: the process could not be spawned.
    """
    iso = probe_isolation(params.namespaces, params.user)
    taskset = shutil.which("taskset")
    pin = [taskset, "-c", ",".join(map(str, cores))] if taskset else []
    argv = [*pin, *iso.prefix, *_limits_prefix(params), str(exe), str(CHANNEL_FD), *args]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C", "HOME": str(workdir), **omp_env(cores)}
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
        raise BenchInfraError(f"cannot start the sandbox ({argv[0]}): {err}") from err
    os.close(w)
    deadline = t0 + timeout
    payload, timed_out = bytearray(), False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                if len(payload) < _PAYLOAD_LIMIT:
                    payload += chunk
        reaped = _reap(pid, deadline if not timed_out else time.monotonic())
        timed_out = timed_out or reaped is None
        status, usage = reaped if reaped is not None else _kill_and_reap(pid)
    finally:
        os.close(r)
        _killpg(pid)  # nothing of the job may outlive it
    wall = time.monotonic() - t0
    cpu = usage.ru_utime + usage.ru_stime
    load = foreign_load(before, busy_ticks(cores), cpu, wall)
    output = log.read_bytes()[:4096].decode("utf-8", "replace") if log.exists() else ""
    if timed_out:
        return RunOutcome("timeout", 0, bytes(payload), output, wall, cpu, load)
    if os.WIFSIGNALED(status):
        return RunOutcome("signaled", os.WTERMSIG(status), bytes(payload), output, wall, cpu, load)
    return RunOutcome("exited", os.WEXITSTATUS(status), bytes(payload), output, wall, cpu, load)


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
