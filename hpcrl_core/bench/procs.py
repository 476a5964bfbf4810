"""Running the engine's own helper programs (preprocessor, compiler, nm, readelf) with a timeout.

Each runs in its own process group, pinned to the given cores, and the whole group is killed on timeout, so a
compiler stuck on adversarial input never outlives its job. The kernel itself runs through ``sandbox.py``.

Test: ``pytest tests/bench/test_compile.py``.
"""

from __future__ import annotations

import contextlib
import os
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
    returncode: int | None  # None when it timed out
    stdout: str
    stderr: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def taskset_prefix(cores: Sequence[int] | None) -> list[str]:
    """``taskset -c LIST`` when cores are given and taskset exists; pinning is best effort for helpers."""
    if not cores:
        return []
    exe = shutil.which("taskset")
    return [exe, "-c", ",".join(str(c) for c in cores)] if exe else []


def run_tool(argv: Sequence[str], *, timeout: float, cwd: Path | None = None, cores: Sequence[int] | None = None,
             env: dict[str, str] | None = None) -> ProcResult:
    """Run a helper program to completion or timeout.

    Raises:
        BenchInfraError: the program could not be started (missing compiler, bad cwd).
    """
    cmd = taskset_prefix(cores) + list(argv)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise BenchInfraError(f"cannot start {argv[0]!r}: {exc}; install it or fix bench.compiler") from exc
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    return ProcResult(rc, out[:_OUTPUT_LIMIT].decode("utf-8", "replace"),
                      err[:_OUTPUT_LIMIT].decode("utf-8", "replace"), time.monotonic() - t0)
