"""Loader for HPC-GPT's Alpaca-style JSON files (``instruction``, ``input``, ``output``), e.g. task1_ml_perf.json,
task1_plp.json and its data-race files.

The file is a JSON array of objects (a JSON-lines file is accepted too). Each record becomes a ``Record`` whose
user message is the instruction followed by the input, whose completion is the output; ``answer`` is the output
unless the caller maps it (race labels). Every problem names the file, the record index and the field.

Test: ``pytest tests/data/qa/test_alpaca.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import DataError

AnswerMap = Callable[[str, Path, int], str]


def read_alpaca(path: Path) -> list[dict[str, Any]]:
    """The raw records of an Alpaca JSON (array) or JSON-lines file.

    Raises:
        DataError: missing file, malformed JSON, or a top level that is not a list of objects.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such file (check the hpcgpt:PATH source in params.yaml prepare.sources)")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        data = _json_lines(path, text, err)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of records, got {type(data).__name__}")
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise DataError(f"{path}: record {i}: expected an object, got {type(rec).__name__}")
    return data


def _json_lines(path: Path, text: str, first_err: json.JSONDecodeError) -> list[Any]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
        raise DataError(f"{path}: not valid JSON at line {first_err.lineno} column {first_err.colno} "
                        f"({first_err.msg})")
    out = []
    for lineno, line in enumerate(lines, 1):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: record {lineno - 1} (line {lineno}): not valid JSON ({err.msg})") from None
    return out


def load_alpaca(path: Path, family: str, system: str | None = None, answer_map: AnswerMap | None = None,
                metadata: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> list[Record]:
    """Records of one family from an Alpaca file.

    Args:
        path: the JSON file.
        family: the family the records belong to.
        system: optional system message for every prompt.
        answer_map: turns the output into the short reference answer (may raise ``DataError``).
        metadata: extra metadata from the raw record.

    Raises:
        DataError: naming file, record index and field.
    """
    out = []
    for i, rec in enumerate(read_alpaca(path)):
        for key in ("instruction", "output"):
            if not isinstance(rec.get(key), str) or not rec[key].strip():
                raise DataError(f"{path}: record {i}: field {key!r} is missing or not a non-empty string")
        if "input" in rec and not isinstance(rec["input"], str):
            raise DataError(f"{path}: record {i}: field 'input' must be a string")
        user = rec["instruction"].strip()
        if rec.get("input", "").strip():
            user += "\n\n" + rec["input"].strip()
        output = rec["output"].strip()
        answer = answer_map(output, path, i) if answer_map else output
        out.append(Record(family=family, prompt=messages(system, user), completion=assistant(output), answer=answer,
                          metadata=metadata(rec) if metadata else {},
                          provenance={"source": f"hpcgpt:{path}", "record": i}))
    return out
