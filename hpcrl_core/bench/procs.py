"""Running the engine's own helper programs (preprocessor, compiler, nm, readelf) with limits.

Each runs in its own process group, pinned to the given cores, optionally under rlimits (address space, CPU
time) through ``prlimit``, and is killed with its whole group on timeout. Output is read as it comes and kept
only up to ``max_output`` bytes per stream; with ``kill_on_overflow`` a program that writes more is killed, so
an expansion bomb cannot exhaust the parent's memory. The kernel itself runs through ``sandbox.py``.

Test: ``pytest tests/bench/test_engine.py tests/bench/test_adversarial.py``.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpcrl_core.errors import BenchInfraError

_OUTPUT_LIMIT = 64 * 1024


@dataclass(frozen=True)
class ProcResult:
    returncode: int | None  # None when it timed out or was stopped for writing too much
    stdout: str
    stderr: str
    seconds: float
    overflow: bool = False

    @property
    def timed_out(self) -> bool:
        return self.returncode is None and not self.overflow


@dataclass(frozen=True)
class ToolLimits:
    memory_mb: int
    cpu_s: int


def taskset_prefix(cores: Sequence[int] | None) -> list[str]:
    """``taskset -c LIST`` when cores are given and taskset exists; pinning is best effort for helpers."""
    if not cores:
        return []
    exe = shutil.which("taskset")
    return [exe, "-c", ",".join(str(c) for c in cores)] if exe else []


def limits_prefix(limits: ToolLimits | None) -> list[str]:
    exe = shutil.which("prlimit")
    if limits is None or not exe:
        return []
    return [exe, f"--as={limits.memory_mb * 1024 * 1024}", f"--cpu={limits.cpu_s}", "--core=0", "--"]


def run_tool(argv: Sequence[str], *, timeout: float, cwd: Path | None = None, cores: Sequence[int] | None = None,
             env: dict[str, str] | None = None, limits: ToolLimits | None = None, max_output: int = _OUTPUT_LIMIT,
             kill_on_overflow: bool = False) -> ProcResult:
    """Run a helper program to completion, timeout or overflow.

    Raises:
        BenchInfraError: the program could not be started (missing compiler, bad cwd).
    """
    cmd = taskset_prefix(cores) + limits_prefix(limits) + list(argv)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise BenchInfraError(f"cannot start {argv[0]!r}: {exc}; install it or fix bench.compiler") from exc
    out, err, stopped = _collect(proc, t0 + timeout, max_output, kill_on_overflow)
    rc = None if stopped else proc.wait()
    return ProcResult(rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - t0,
                      overflow=stopped == "overflow")


def _collect(proc: subprocess.Popen[bytes], deadline: float, max_output: int,
             kill_on_overflow: bool) -> tuple[bytes, bytes, str | None]:
    """Read both pipes until EOF; returns (stdout head, stderr head, why it was stopped or None)."""
    assert proc.stdout is not None and proc.stderr is not None
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    sel = selectors.DefaultSelector()
    for f in bufs:
        sel.register(f, selectors.EVENT_READ)
    stopped: str | None = None
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                stopped = "timeout"
                break
            for key, _ in sel.select(min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.fileobj]  # type: ignore[index]
                buf += chunk[: max(0, max_output - len(buf))]
                if kill_on_overflow and len(chunk) > 0 and len(buf) >= max_output:
                    stopped = "overflow"
                    break
            if stopped:
                break
    finally:
        sel.close()
        if stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), stopped
