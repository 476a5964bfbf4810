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
