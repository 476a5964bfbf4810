"""Tests of atomic writes. Run: pytest tests/test_files.py"""

from __future__ import annotations

from pathlib import Path

from hpcrl_core.files import write_text_atomic


def test_write_creates_folders_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    write_text_atomic(path, "one\n")
    write_text_atomic(path, "two\n")
    assert path.read_text() == "two\n"
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]
