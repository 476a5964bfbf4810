"""Names of system calls, for the reason of a refused call (the seccomp filter reports only its number).

Read once from the C library's headers through the compiler that builds the runner (``gcc -dM -E`` of
``<sys/syscall.h>``), so the table matches the architecture the kernel runs on; ``syscall N`` when unknown.

Test: ``pytest tests/bench/test_tamper.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache

_DEFINE = re.compile(r"^#define __NR_(\w+) (\d+)$")


@lru_cache(maxsize=1)
def _table() -> dict[int, str]:
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        return {}
    try:
        res = subprocess.run([cc, "-dM", "-E", "-"], input="#include <sys/syscall.h>\n", capture_output=True,
                             text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    out: dict[int, str] = {}
    for line in res.stdout.splitlines():
        m = _DEFINE.match(line.strip())
        if m:
            out.setdefault(int(m.group(2)), m.group(1))
    return out


def syscall_name(nr: int) -> str:
    """``execve`` for 59 on x86-64; ``syscall N`` when the number is unknown."""
    return _table().get(nr, f"syscall {nr}")
