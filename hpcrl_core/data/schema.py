"""The one JSONL schema of every prepared item, and atomic reading/writing of it.

A record (one line of ``data/<family>/{train,eval}.jsonl``)::

    {"id": "race_c-3f9a1c2b7d10",                       # family + content hash prefix (stable)
     "family": "race_c",                                # dgemm | race_c | race_fortran | mlperf | plp
     "prompt": [{"role": "system", ...}, {"role": "user", "content": "..."}],
     "completion": [{"role": "assistant", "content": "..."}],   # the SFT target
     "answer": "yes",                                   # short reference answer for metrics and rewards
     "metadata": {...},                                 # family-specific, same keys within a family
     "provenance": {"source": "synthetic:race@1", ...}} # where it came from: generator+seed, or file+record

``prompt`` + ``completion`` is TRL's conversational prompt-completion format: SFTTrainer trains on the completion
only; GRPOTrainer takes ``prompt`` and passes the other columns to reward functions.

Test: ``pytest tests/data/test_schema.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# the data families are defined with the params schema, which validates sft.families without the data code
from hpcrl_core.config.base import FAMILIES as FAMILIES
from hpcrl_core.errors import DataError
from hpcrl_core.files import json_lines


@dataclass(frozen=True)
class Record:
    """One prepared item. ``id`` is derived from the content when left empty."""

    family: str
    prompt: list[dict[str, str]]
    completion: list[dict[str, str]]
    answer: str
    metadata: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise DataError(f"unknown family {self.family!r}; allowed: {', '.join(FAMILIES)}")
        if not self.id:
            object.__setattr__(self, "id", f"{self.family}-{self.content_hash()[:12]}")

    @property
    def question(self) -> str:
        """The last user message: what is asked."""
        return next((m["content"] for m in reversed(self.prompt) if m.get("role") == "user"), "")

    @property
    def response(self) -> str:
        return self.completion[-1]["content"] if self.completion else ""

    def content_hash(self) -> str:
        """Hash of what the model sees and must produce (whitespace-normalised); used for dedupe and leak checks."""
        text = json.dumps([_norm(m["content"]) for m in self.prompt + self.completion], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def question_hash(self) -> str:
        """Hash of the question alone: equal questions with different answers are conflicts."""
        return hashlib.sha256(_norm(self.question).lower().encode()).hexdigest()

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


def _norm(text: str) -> str:
    return " ".join(text.split())


def messages(system: str | None, user: str) -> list[dict[str, str]]:
    out = [{"role": "system", "content": system}] if system else []
    return out + [{"role": "user", "content": user}]


def assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def write_jsonl(path: Path, records: Iterable[Record]) -> int:
    """Write records atomically (temp file + rename): a crash never leaves a half-written file. Returns the count."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as f:
        for r in records:
            f.write(r.to_json() + "\n")
            count += 1
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)
    return count


def read_jsonl(path: Path) -> Iterator[Record]:
    """Read records back.

    Raises:
        DataError: naming the file, line and field of the first malformed record.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such data file")
    for lineno, d in json_lines(path):
        missing = [k for k in ("family", "prompt", "completion", "answer") if k not in d]
        if missing:
            raise DataError(f"{path}:{lineno}: record lacks field(s) {missing}")
        yield Record(**{k: d[k] for k in ("family", "prompt", "completion", "answer", "metadata", "provenance", "id")
                        if k in d})
