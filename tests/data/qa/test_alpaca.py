"""Tests of the HPC-GPT Alpaca loader on small files in the real format. Run: pytest tests/data/qa/test_alpaca.py"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.data.qa.alpaca import load_alpaca
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
