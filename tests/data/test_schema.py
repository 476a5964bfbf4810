"""Tests of the record schema and JSONL I/O. Run: pytest tests/data/test_schema.py"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcrl_core.data.schema import Record, assistant, messages, read_jsonl, write_jsonl
from hpcrl_core.errors import DataError


def _rec(q: str = "Is there a race?", a: str = "yes") -> Record:
    return Record("race_c", messages("sys", q), assistant(a + ": x"), a, {"label": a}, {"source": "t"})


def test_ids_are_stable_and_content_derived() -> None:
    assert _rec().id == _rec().id and _rec().id.startswith("race_c-")
    assert _rec().id != _rec(q="Other?").id
    assert _rec(q="Is  there a\nrace?").content_hash() == _rec().content_hash()  # whitespace-normalised


def test_round_trip(tmp_path: Path) -> None:
    records = [_rec(), _rec(q="Q2", a="no")]
    assert write_jsonl(tmp_path / "x.jsonl", records) == 2
    assert list(read_jsonl(tmp_path / "x.jsonl")) == records
    assert not list(tmp_path.glob(".*.tmp"))


def test_unknown_family_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="unknown family 'race'"):
        Record("race", [], [], "")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(_rec().to_json() + "\n{not json\n")
    with pytest.raises(DataError, match=r"bad.jsonl:2: not valid JSON"):
        list(read_jsonl(bad))
    bad.write_text('{"family": "plp", "prompt": []}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:1: record lacks field\(s\) \['completion', 'answer'\]"):
        list(read_jsonl(bad))
    with pytest.raises(DataError, match="no such data file"):
        list(read_jsonl(tmp_path / "missing.jsonl"))


def test_trl_formats() -> None:
    """SFTTrainer reads prompt/completion conversations; GRPOTrainer a prompt plus extra columns."""
    from datasets import Dataset

    ds = Dataset.from_list([_rec().__dict__ | {}, _rec(q="Q2", a="no").__dict__])
    assert ds.column_names[:4] == ["family", "prompt", "completion", "answer"]
    assert ds[0]["prompt"][-1]["role"] == "user" and ds[0]["completion"][0]["role"] == "assistant"
