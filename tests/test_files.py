"""Tests of atomic writes and replaced folders. Run: pytest tests/test_files.py"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hpcrl_core.errors import DataError
from hpcrl_core.files import json_lines, replaced_folder, write_text_atomic


def test_write_creates_folders_replaces_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b.json"
    write_text_atomic(path, "one\n")
    write_text_atomic(path, "two\n")
    assert path.read_text() == "two\n"
    assert [p.name for p in path.parent.iterdir()] == ["b.json"]


def test_a_replaced_folder_is_swapped_in_whole_or_not_at_all(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with replaced_folder(out) as tmp:
        (tmp / "new.txt").write_text("new")
        assert (out / "old.txt").exists()  # the old folder stays until the new one is complete
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    with pytest.raises(RuntimeError, match="disk full"), replaced_folder(out) as tmp:
        (tmp / "half.txt").write_text("half")
        raise RuntimeError("disk full")
    assert sorted(p.name for p in out.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary or old folder left beside it
    with replaced_folder(tmp_path / "fresh") as tmp:
        (tmp / "a.txt").write_text("a")
    assert (tmp_path / "fresh" / "a.txt").read_text() == "a"


def test_json_lines_skips_blank_lines_and_names_the_bad_one(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n[2]\n{broken\n')
    rows = json_lines(path, hint="; make it again")
    assert next(rows) == (1, {"a": 1}) and next(rows) == (3, [2])
    with pytest.raises(DataError, match=rf"^{re.escape(str(path))}:4: not valid JSON \(.+\); make it again$"):
        next(rows)
