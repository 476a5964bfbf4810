"""Loader for HPC-GPT's Alpaca-style JSON files (``instruction``, ``input``, ``output``), e.g. task1_ml_perf.json,
task1_plp.json and its data-race files.

The file is a JSON array of objects (a JSON-lines file is accepted too). Each record becomes a ``Record`` whose
user message is the instruction followed by the input, whose completion is the output; ``answer`` is the output
unless the caller maps it (race labels). Every problem names the file, the record index and the field.

A record that cannot be read or labelled (not an object, a missing or empty field, an unreadable JSON line, an
output the ``answer_map`` cannot label) stops the load, unless the caller passes a ``quarantine`` list: then it is
appended there (``hpcrl_core.data.quarantine``) and the load goes on. A file that is not JSON at all, or not a list,
always stops it.

Test: ``pytest tests/data/qa/test_alpaca.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcrl_core.data.quarantine import Quarantined
from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import DataError

AnswerMap = Callable[[str, Path, int], str]


class _Unreadable:
    """A JSON-lines line that does not parse; stands in for its record so that indices stay the file's."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def read_alpaca(path: Path) -> list[dict[str, Any]]:
    """The raw records of an Alpaca JSON (array) or JSON-lines file.

    Raises:
        DataError: missing file, malformed JSON, or a top level that is not a list of objects.
    """
    out = []
    for i, rec in enumerate(_raw_records(path)):
        if isinstance(rec, _Unreadable):
            raise DataError(f"{path}: record {i} (line {i + 1}): {rec.reason}")
        if not isinstance(rec, dict):
            raise DataError(f"{path}: record {i}: expected an object, got {type(rec).__name__}")
        out.append(rec)
    return out


def _raw_records(path: Path) -> list[Any]:
    if not path.is_file():
        raise DataError(f"{path}: no such file (check the hpcgpt:PATH source in params.yaml prepare.sources)")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        data = _json_lines(path, text, err)
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a JSON array of records, got {type(data).__name__}")
    return data


def _json_lines(path: Path, text: str, first_err: json.JSONDecodeError) -> list[Any]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2 or not lines[0].lstrip().startswith("{"):
        raise DataError(f"{path}: not valid JSON at line {first_err.lineno} column {first_err.colno} "
                        f"({first_err.msg})")
    out: list[Any] = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as err:
            out.append(_Unreadable(f"not valid JSON ({err.msg})"))
    return out


def load_alpaca(path: Path, family: str, system: str | None = None, answer_map: AnswerMap | None = None,
                metadata: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
                quarantine: list[Quarantined] | None = None) -> list[Record]:
    """Records of one family from an Alpaca file.

    Args:
        path: the JSON file.
        family: the family the records belong to.
        system: optional system message for every prompt.
        answer_map: turns the output into the short reference answer (may raise ``DataError``).
        metadata: extra metadata from the raw record.
        quarantine: when given, records that cannot be read or labelled are appended to it (source
            ``hpcgpt:<path>``, their index, the reason) instead of raising; the good records load as without it.

    Raises:
        DataError: naming file, record index and field; for a single record only when ``quarantine`` is None.
    """
    out = []
    for i, rec in enumerate(_raw_records(path)):
        try:
            out.append(_record(path, i, rec, family, system, answer_map, metadata))
        except DataError as err:
            if quarantine is None:
                raise
            quarantine.append(Quarantined(source=f"hpcgpt:{path}", record=i, id=_own_id(rec),
                                          reason=_reason(str(err), path, i)))
    return out


def _record(path: Path, i: int, rec: Any, family: str, system: str | None, answer_map: AnswerMap | None,
            metadata: Callable[[dict[str, Any]], dict[str, Any]] | None) -> Record:
    if isinstance(rec, _Unreadable):
        raise DataError(f"{path}: record {i} (line {i + 1}): {rec.reason}")
    if not isinstance(rec, dict):
        raise DataError(f"{path}: record {i}: expected an object, got {type(rec).__name__}")
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
    return Record(family=family, prompt=messages(system, user), completion=assistant(output), answer=answer,
                  metadata=metadata(rec) if metadata else {},
                  provenance={"source": f"hpcgpt:{path}", "record": i})


def _reason(message: str, path: Path, i: int) -> str:
    """The message without its ``<path>: record <i>: `` prefix: the quarantine entry names source and record."""
    rest = message.removeprefix(f"{path}: record {i}")
    return rest[2:] if rest.startswith(": ") else rest.strip()


def _own_id(rec: Any) -> str | None:
    """The record's ``id`` field, when it has one (HPC-GPT's files have none; other Alpaca files may)."""
    value = rec.get("id") if isinstance(rec, dict) else None
    return None if value is None else str(value)
