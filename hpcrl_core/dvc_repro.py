"""Run one DVC stage: ``dvc repro <dvc_stage>`` in the repository root, as DVC does by default (the stage and
whatever upstream stage changed). Each output line goes to a callback as it arrives; the result says whether DVC ran
the stage or skipped it ("Stage '<stage>' didn't change, skipping") and how long it took.

A failing stage raises ``DvcStageError`` with the tail of the output; ``DvcStageLockedError`` (another DVC process
holds the repository lock) is the one transient fault, which the Prefect task (``tasks/pipeline.py``) retries. Plain
Python: the pipeline flow runs it through that task, and anything else may call it directly.

Test: ``pytest tests/flows/test_train_dgemm_flow.py``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcrl_core.errors import HPCRLError

TAIL_LINES = 40
_RAN = re.compile(r"Running stage '([^']+)'")
_SKIPPED = re.compile(r"(?:Stage )?'([^']+)' didn't change, skipping")
_LOCKED = ("Unable to acquire lock", "is busy, it is being blocked by")


class DvcStageError(HPCRLError):
    """``dvc repro <dvc_stage>`` exited non-zero.

    Attributes:
        dvc_stage: the DVC stage. returncode: the exit code of ``dvc repro``. tail: its last output lines.
    """

    def __init__(self, dvc_stage: str, returncode: int, seconds: float, tail: list[str], repo_root: Path) -> None:
        self.dvc_stage, self.returncode, self.seconds = dvc_stage, returncode, seconds
        self.tail, self.repo_root = tail, repo_root
        text = "\n".join(f"    {line}" for line in tail) or "    (no output)"
        super().__init__(
            f"stage {dvc_stage!r} failed: `dvc repro {dvc_stage}` in {repo_root} exited with {returncode} after "
            f"{seconds:.1f} s. Last {len(tail)} lines of its output:\n{text}\n"
            f"Fix the cause and run the pipeline again: DVC reruns only the stages whose inputs changed.")

    def __reduce__(self) -> tuple[type, tuple[str, int, float, list[str], Path]]:
        # picklable, so that Prefect can persist or ship the failed state
        return type(self), (self.dvc_stage, self.returncode, self.seconds, self.tail, self.repo_root)


class DvcStageLockedError(DvcStageError):
    """Another DVC process holds the repository (or a stage's) lock: an infrastructure fault, retried."""


@dataclass(frozen=True)
class DvcStageResult:
    """What ``dvc repro <dvc_stage>`` did.

    Attributes:
        dvc_stage: the target stage. status: ``ran`` or ``skipped`` (DVC said it didn't change), ``unknown`` if DVC
        printed neither for the target (``target_status``: a matrix group by its members). seconds: wall time of
        the command. ran / skipped: every stage DVC reported running / skipping in this call (upstream stages
        included).
    """

    dvc_stage: str
    status: str
    seconds: float
    ran: tuple[str, ...]
    skipped: tuple[str, ...]


def dvc_repro_command(dvc_stage: str) -> list[str]:
    """The command line: this interpreter's DVC, so that the flow and ``make`` use the same installation."""
    return [sys.executable, "-m", "dvc", "repro", dvc_stage]


def _stop(proc: subprocess.Popen[str]) -> None:
    """Stop ``dvc repro`` and the stage command it started (own process group), e.g. on cancellation."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def run_dvc_stage(dvc_stage: str, repo_root: Path, on_line: Callable[[str], Any] = print,
                  env: Mapping[str, str] | None = None) -> DvcStageResult:
    """Run ``dvc repro <dvc_stage>`` in ``repo_root``, passing each output line to ``on_line``.

    ``env`` adds to the command's environment (e.g. the log format of the stage's own Prefect run).

    Raises:
        DvcStageLockedError: another DVC process holds a lock (retry later).
        DvcStageError: the command exited non-zero; the message holds the tail of its output.
    """
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", "DVC_NO_ANALYTICS": "1", **(env or {})}
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    ran: list[str] = []
    skipped: list[str] = []
    t0 = time.monotonic()
    # A process group of its own, so that a cancelled flow run also stops the stage command DVC started.
    proc = subprocess.Popen(dvc_repro_command(dvc_stage), cwd=repo_root, env=full_env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True, errors="replace",
                            bufsize=1, start_new_session=True)
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.rstrip("\n")
            tail.append(line)
            on_line(line)
            if m := _RAN.search(line):
                ran.append(m.group(1))
            elif m := _SKIPPED.search(line):
                skipped.append(m.group(1))
        returncode = proc.wait()
    finally:
        _stop(proc)
    seconds = round(time.monotonic() - t0, 2)
    if returncode != 0:
        error = DvcStageLockedError if any(k in line for line in tail for k in _LOCKED) else DvcStageError
        raise error(dvc_stage, returncode, seconds, list(tail), repo_root)
    return DvcStageResult(dvc_stage, target_status(dvc_stage, ran, skipped), seconds, tuple(ran), tuple(skipped))


def target_status(dvc_stage: str, ran: Sequence[str], skipped: Sequence[str]) -> str:
    """``ran``, ``skipped`` or ``unknown`` for a target: a stage, or a ``foreach``/``matrix`` group whose members DVC
    names ``<group>@<item>`` (the group ran when any member ran, was skipped when every member it named was)."""
    def members(names: Sequence[str]) -> list[str]:
        return [n for n in names if n == dvc_stage or n.startswith(f"{dvc_stage}@")]

    return "ran" if members(ran) else "skipped" if members(skipped) else "unknown"
