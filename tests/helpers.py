"""Test helpers that import nothing heavy (usable before the engine exists)."""

from __future__ import annotations

import os
from pathlib import Path


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention ``path`` (a job's scratch folder)."""
    found = []
    needle = str(path).encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmd:
            found.append(cmd.replace(b"\0", b" ").decode(errors="replace"))
    return found


def public_tmp(tmp_path: Path) -> Path:
    """A folder under the system temp dir that an unprivileged sandbox user can traverse (pytest's is 0700)."""
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="hpcrl-t-"))
    os.chmod(d, 0o755)
    return d


def size_guard(i: int) -> str:
    """A return at n = 1_000_000 + i, a size no test times: the line ``own_machine_code`` puts first in a kernel."""
    return f"if (n == {1_000_000 + i}) return;"


def own_machine_code(code: str, i: int) -> str:
    """``code``, a dgemm kernel whose first ``{`` opens dgemm's body, with ``size_guard(i)`` first in that body, so
    each i compiles to its own machine code and is timed, not given the figure of another kernel of the same
    machine code. (``+ 0.0 * i`` folds to one machine code, and so does a return at a negative n, where the loops do
    nothing anyway.)"""
    head, brace, body = code.partition("{")
    if "void dgemm(" not in head or not brace:
        raise ValueError("own_machine_code needs a kernel whose first brace opens dgemm's body")
    return f"{head}{brace} {size_guard(i)}{body}"
