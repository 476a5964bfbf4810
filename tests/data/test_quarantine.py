"""Tests of the quarantine of unreadable records: the share threshold per source, its error, the card section.

Run: pytest tests/data/test_quarantine.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.data.quarantine import Quarantine, Quarantined, quarantine_markdown
from hpcrl_core.errors import DataError

SRC = "hpcgpt:/data/task2_c_c++.json"


def _held(n: int, source: str = SRC) -> list[Quarantined]:
    return [Quarantined(source, 10 * k, f"field 'output': cannot read a yes/no race label from 'x{k}'")
            for k in range(n)]


def test_one_broken_record_of_the_published_c_file_is_admitted() -> None:
    q = Quarantine(0.01)
    q.admit(SRC, 1857, _held(1))  # HPC-GPT's C race file: 1,858 records, one with a stray fragment as output
    assert q.sources == {SRC: {"records": 1858, "kept": 1857, "quarantined": 1}}
    section = q.as_dict()
    assert section["count"] == 1 and section["max_share"] == 0.01
    assert section["records"] == [{"source": SRC, "record": 0,
                                   "reason": "field 'output': cannot read a yes/no race label from 'x0'"}]


def test_a_share_above_the_threshold_stops_with_count_threshold_and_first_reasons() -> None:
    q = Quarantine(0.01)
    with pytest.raises(DataError) as err:
        q.admit(SRC, 95, _held(5))
    msg = str(err.value)
    assert msg.startswith(f"{SRC}: 5 of 100 records (5.0%) cannot be read or labelled")
    assert "prepare.max_quarantine_share = 0.01 (1.0% of a source's records)" in msg
    assert "record 0: field 'output'" in msg and "record 20:" in msg and "record 30:" not in msg
    assert "(and 2 more)" in msg and "raise prepare.max_quarantine_share in params.yaml" in msg
    assert not q.items and not q.sources  # nothing of a refused source is kept


def test_the_threshold_is_a_share_of_each_source_and_exactly_the_limit_passes() -> None:
    q = Quarantine(0.05)
    q.admit(SRC, 95, _held(5))  # exactly 5%: allowed
    q.admit("hpcgpt:/data/other.json", 19, _held(1, "hpcgpt:/data/other.json"))  # 5% of its own 20
    assert q.as_dict()["count"] == 6
    with pytest.raises(DataError, match="2 of 20 records"):
        q.admit("hpcgpt:/data/third.json", 18, _held(2, "hpcgpt:/data/third.json"))


def test_zero_share_stops_at_the_first_broken_record_but_admits_a_clean_source() -> None:
    q = Quarantine(0.0)
    q.admit(SRC, 40, [])
    with pytest.raises(DataError, match="1 of 41 records"):
        q.admit(SRC, 40, _held(1))
    Quarantine(0.0).admit(SRC, 0, [])  # an empty file is not a division by zero


def test_ids_are_shown_and_the_markdown_lists_sources_and_records() -> None:
    q = Quarantine(0.5)
    q.admit(SRC, 3, [Quarantined(SRC, 2, "field 'output' is missing or not a non-empty string", id="r-2")])
    lines = quarantine_markdown(q.as_dict())
    assert "- records set aside: 1 (allowed: at most 50.0% of each source's records)" in lines
    assert f"- {SRC}: 1 of 4" in lines
    assert f"| {SRC} | 2 (id r-2) | field 'output' is missing or not a non-empty string |" in lines
    assert Quarantined(SRC, 2, "bad", id="r-2").describe() == "record 2 (id 'r-2'): bad"
