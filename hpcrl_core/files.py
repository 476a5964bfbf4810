"""Atomic file writes (a reader sees the old file or the new one, never half of one), a folder written whole or not
at all (``replaced_folder``), and JSON state files and JSON-lines files read back with a clear error.

Test: ``pytest tests/test_files.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hpcrl_core.errors import DataError


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path`` (named per process), then rename it over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def write_text_atomic(path: Path, text: str) -> None:
    """``write_bytes_atomic`` of ``text`` encoded as UTF-8."""
    write_bytes_atomic(path, text.encode("utf-8"))


@contextlib.contextmanager
def replaced_folder(out_dir: Path) -> Iterator[Path]:
    """A fresh temporary folder beside ``out_dir`` to write into; swapped in for ``out_dir`` when the block ends.

    The old folder is moved aside (``.<name>.old``) until the new one is in place, then removed. On any error the
    temporary folder is removed and ``out_dir`` is left as it was.
    """
    tmp = out_dir.with_name(f".{out_dir.name}.tmp")
    old = out_dir.with_name(f".{out_dir.name}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
        shutil.rmtree(old, ignore_errors=True)
        if out_dir.exists():
            out_dir.rename(old)
        tmp.rename(out_dir)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not out_dir.exists():
            old.rename(out_dir)
        raise


def read_json_file(path: Path, kind: str) -> Any:
    """The JSON value in ``path``, a state file of the given ``kind`` (named in errors).

    Raises:
        DataError: the file is missing or not valid JSON.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such {kind} file")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None


def json_lines(path: Path, hint: str = "") -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of the JSON-lines file ``path``, read as it goes; the caller checks
    the values' shape. The file must exist (callers say how to make it).

    Raises:
        DataError: ``path:line: not valid JSON (...)`` at the first line that is not, with ``hint`` after it.
    """
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}:{lineno}: not valid JSON ({err.msg}){hint}") from None
