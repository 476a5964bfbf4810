"""The held-out items an evaluation reads: the first records of ``data/<family>/<file>.jsonl``.

Shared by the post-SFT runner (``runner.py``) and the HARGO comparison (``hargo.py``), so both read the same items
the same way: a missing or empty file is no items plus a note saying how to make it, never an exception, since
the reports say which families they could not evaluate.

Test: ``pytest tests/evaluation/test_hargo.py -k load_items`` and ``tests/evaluation/test_runner.py -k missing``.
"""

from __future__ import annotations

from pathlib import Path

from hpcrl_core.data.schema import Record, read_jsonl


def read_eval_items(data_dir: Path, family: str, name: str, limit: int, notes: dict[str, str]) -> list[Record]:
    """The first ``limit`` records of ``data_dir/family/name``, in file order.

    Args:
        data_dir: the prepared data (``data/``).
        family: the family folder (``race_c``, ``mlperf``, ...).
        name: the file in it (``eval.jsonl``, ``problems_eval.jsonl``).
        limit: the most records read (>= 1).
        notes: gets ``notes[family]``, a line saying why, when the file is missing or holds no records.

    Returns:
        Up to ``limit`` records; none when the file is missing or empty.

    Raises:
        DataError: a line of the file is not a valid record (``read_jsonl`` names the line).
    """
    path = data_dir / family / name
    if not path.is_file():
        notes[family] = f"{path} is missing; run `dvc repro prepare` to create it"
        return []
    records = [r for _, r in zip(range(limit), read_jsonl(path), strict=False)]
    if not records:
        notes[family] = f"{path} holds no records"
    return records
