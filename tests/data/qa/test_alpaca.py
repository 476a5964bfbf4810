"""Tests of the HPC-GPT Alpaca loader on small files in the real format, and of its quarantine of broken records.

Run: pytest tests/data/qa/test_alpaca.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.data.qa.alpaca import load_alpaca
from hpcrl_core.data.quarantine import Quarantined
from hpcrl_core.errors import DataError

ROWS = [
    {"instruction": "What is the reference model of the MLPerf Training image classification benchmark?",
     "input": "", "output": "ResNet-50 v1.5"},
    {"instruction": "Answer briefly.", "input": "Which division allows any model?", "output": "The open division"},
]


def test_array_and_json_lines(tmp_path: Path) -> None:
    arr = tmp_path / "task1_ml_perf.json"
    arr.write_text(json.dumps(ROWS, indent=2))
    recs = load_alpaca(arr, "mlperf", system="Be brief.")
    assert [r.answer for r in recs] == ["ResNet-50 v1.5", "The open division"]
    assert recs[1].question == "Answer briefly.\n\nWhich division allows any model?"
    assert recs[0].prompt[0] == {"role": "system", "content": "Be brief."}
    assert recs[0].provenance == {"source": f"hpcgpt:{arr}", "record": 0}
    lines = tmp_path / "rows.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in ROWS))
    assert [r.answer for r in load_alpaca(lines, "mlperf")] == [r.answer for r in recs]


@pytest.mark.parametrize(("content", "needle"), [
    ('[{"instruction": "q", "output": "a"', "not valid JSON"),
    ('{"instruction": "q"}', "expected a JSON array"),
    ('[{"instruction": "q", "input": "", "output": "a"}, {"instruction": "q2", "input": ""}]',
     "record 1: field 'output'"),
    ('[{"instruction": "q", "input": 3, "output": "a"}]', "record 0: field 'input'"),
    ('["just a string"]', "record 0: expected an object"),
])
def test_bad_files_name_file_record_and_field(tmp_path: Path, content: str, needle: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(content)
    with pytest.raises(DataError) as err:
        load_alpaca(f, "plp")
    assert str(f) in str(err.value) and needle in str(err.value)


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_alpaca(tmp_path / "absent.json", "plp")


def test_quarantine_sets_broken_records_aside_and_loads_the_rest(tmp_path: Path) -> None:
    f = tmp_path / "task1_ml_perf.json"
    f.write_text(json.dumps([ROWS[0], "just a string", {"id": "q-7", "instruction": "Q?", "input": ""},
                             {"instruction": "Q?", "input": 3, "output": "a"}, ROWS[1]]))
    held: list[Quarantined] = []
    recs = load_alpaca(f, "mlperf", quarantine=held)
    assert [(r.provenance["record"], r.answer) for r in recs] == [(0, "ResNet-50 v1.5"), (4, "The open division")]
    assert [(q.record, q.id, q.reason) for q in held] == [
        (1, None, "expected an object, got str"),
        (2, "q-7", "field 'output' is missing or not a non-empty string"),
        (3, None, "field 'input' must be a string")]
    assert {q.source for q in held} == {f"hpcgpt:{f}"}
    strict = tmp_path / "strict.json"
    strict.write_text(json.dumps(ROWS))
    assert [r.id for r in recs] == [r.id for r in load_alpaca(strict, "mlperf")]  # good records unchanged


def test_quarantine_takes_unreadable_json_lines_but_not_an_unreadable_file(tmp_path: Path) -> None:
    lines = tmp_path / "rows.jsonl"
    lines.write_text(json.dumps(ROWS[0]) + "\n{\"instruction\": \"q\", \"output\n" + json.dumps(ROWS[1]) + "\n")
    held: list[Quarantined] = []
    assert len(load_alpaca(lines, "mlperf", quarantine=held)) == 2
    assert held[0].record == 1 and held[0].reason.startswith("(line 2): not valid JSON")
    with pytest.raises(DataError, match=r"record 1 \(line 2\): not valid JSON"):
        load_alpaca(lines, "mlperf")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"instruction": "q", "output": "a"}')
    with pytest.raises(DataError, match="not valid JSON"):
        load_alpaca(broken, "mlperf", quarantine=[])  # the whole file is unreadable: nothing to quarantine
