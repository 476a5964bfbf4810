"""Machine-wide core reservations: every engine process on a host queues for the same cores.

A timed run owns its slot's cores exclusively, and that must hold across processes (an RL run beside an
evaluation, two experiment seeds, CI beside a training run), not only among one executor's threads. Each core
has a lock file in one folder shared by everything on the host (``HPCRL_LOCK_DIR``, default
``/tmp/hpcrl-cores``); a job holds ``flock`` on the files of all its cores, taken in ascending order so that
slots of different sizes never deadlock. The kernel releases a dead process's locks, so a killed run never
blocks the machine. A thread that already holds a core may take it again (the executor holds the slot around
``Engine.run``, which holds it too); another thread of the same process queues like any other process.

Test: ``pytest tests/bench/test_slots.py``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from hpcrl_core.errors import BenchInfraError


class CoreLocks:
    """Reentrant, machine-wide exclusive holds on CPU cores (one lock file per core in ``folder``)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(PermissionError):  # shared by every user of the host: sticky, world-writable
                os.chmod(self.folder, 0o1777)
        except OSError as err:
            raise BenchInfraError(f"core lock folder {self.folder} is not usable: {err}; set HPCRL_LOCK_DIR to a "
                                  "folder every engine process on this host can write") from err
        self._held: dict[int, tuple[int, int, int]] = {}  # core -> (thread id, depth, fd)
        self._mutex = threading.Lock()

    @contextlib.contextmanager
    def hold(self, cores: Sequence[int]) -> Iterator[float]:
        """Hold ``cores`` exclusively on this machine; yields the seconds spent waiting for them.

        Raises:
            BenchInfraError: a lock file cannot be opened.
        """
        me = threading.get_ident()
        t0 = time.monotonic()
        taken: list[int] = []
        try:
            for core in sorted(set(cores)):
                self._take(core, me)
                taken.append(core)
            yield time.monotonic() - t0
        finally:
            for core in reversed(taken):
                self._release(core)

    @contextlib.contextmanager
    def hold_any(self, slots: Sequence[tuple[int, ...]]) -> Iterator[tuple[tuple[int, ...], float]]:
        """Hold the first of ``slots`` that is free machine-wide (waiting until one is); yields (slot, seconds
        waited). Slots that overlap are fine: each is taken core by core, in ascending order."""
        me = threading.get_ident()
        t0 = time.monotonic()
        delay = 0.002
        while True:
            for slot in slots:
                taken = self._try_all(sorted(set(slot)), me)
                if taken:
                    try:
                        yield slot, time.monotonic() - t0
                    finally:
                        for core in reversed(taken):
                            self._release(core)
                    return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.05)

    def _try_all(self, cores: list[int], me: int) -> list[int]:
        """Take every core without waiting, or none of them."""
        taken: list[int] = []
        for core in cores:
            if not self._take(core, me, wait=False):
                for c in reversed(taken):
                    self._release(c)
                return []
            taken.append(core)
        return taken

    def _take(self, core: int, me: int, wait: bool = True) -> bool:
        with self._mutex:
            held = self._held.get(core)
            if held is not None and held[0] == me:
                self._held[core] = (me, held[1] + 1, held[2])
                return True
        fd = self._open(core)
        delay = 0.002
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as err:
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    os.close(fd)
                    raise BenchInfraError(f"cannot lock core {core} in {self.folder}: {err}") from err
            if not wait:
                os.close(fd)
                return False
            time.sleep(delay)
            delay = min(delay * 1.5, 0.05)
        with self._mutex:
            self._held[core] = (me, 1, fd)
        return True

    def _release(self, core: int) -> None:
        with self._mutex:
            me, depth, fd = self._held[core]
            if depth > 1:
                self._held[core] = (me, depth - 1, fd)
                return
            del self._held[core]
        os.close(fd)  # closing the only descriptor releases the flock

    def _open(self, core: int) -> int:
        path = self.folder / f"core-{core}.lock"
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as err:
            raise BenchInfraError(f"cannot open the core lock {path}: {err}; set HPCRL_LOCK_DIR to a folder every "
                                  "engine process on this host can use") from err
        return fd


_LOCKS: dict[Path, CoreLocks] = {}
_LOCKS_MUTEX = threading.Lock()


def core_locks(folder: Path) -> CoreLocks:
    """The process's one ``CoreLocks`` for ``folder`` (reentrancy must be tracked per process, not per engine)."""
    folder = Path(folder).resolve()
    with _LOCKS_MUTEX:
        if folder not in _LOCKS:
            _LOCKS[folder] = CoreLocks(folder)
        return _LOCKS[folder]
