"""The preference pairs file (``preferences/pairs.jsonl``, written by ``hpcrl_core/training/preferences.py``) and its
reader, checked line by line; the offline trainers read it without the sampling code.

Test: ``pytest tests/training/test_preferences.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcrl_core.errors import DataError
from hpcrl_core.files import json_lines

PAIRS_FILE = "pairs.jsonl"


def load_pairs(path: Path) -> list[dict[str, Any]]:
    """The pairs of ``pairs.jsonl``, each checked for its fields.

    Raises:
        DataError: the file is missing, holds no pairs, or a line is not a well-formed pair (naming the line).
    """
    if not path.is_file():
        raise DataError(f"{path} is missing; run `dvc repro preferences` to make the preference pairs")
    pairs = []
    for n, pair in json_lines(path):
        if not isinstance(pair, dict):
            raise DataError(f"{path}:{n}: expected an object with prompt, chosen and rejected")
        for key in ("prompt", "chosen", "rejected"):
            value = pair.get(key)
            if not (isinstance(value, list) and value and all(isinstance(m, dict) and isinstance(m.get("content"), str)
                                                              for m in value)):
                raise DataError(f"{path}:{n}: field {key!r} must be a non-empty list of chat messages "
                                f"({{'role', 'content'}}); received {value!r}")
        pairs.append(pair)
    if not pairs:
        raise DataError(f"{path} holds no preference pairs; the offline methods need at least one (see its card.json "
                        "for the tie share; raise preferences.samples or preferences.temperature)")
    return pairs
