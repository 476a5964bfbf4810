"""The ``prepare`` stage's core: build every family's data from its sources, clean, split, card, write.

Families: ``dgemm`` (problems, the verified SFT corpus and its prompts), ``race_c``, ``race_fortran`` (data
race detection), ``mlperf`` (factual QA), ``plp`` (descriptive QA). Sources per family come from
``params.yaml`` (``prepare.sources``; a family not listed uses ``synthetic``). All outputs are written into a
temporary folder and swapped in at the end, so a failure leaves ``data/`` as it was.

Layout written::

    data/<family>/train.jsonl, eval.jsonl, rl.jsonl, card.json, card.md   (rl.jsonl: RL prompts only, maybe empty)
    data/race_<language>/NOTICE-DataRaceBench.txt   (only with a dataracebench source: its licence notice)
    data/dgemm/problems_train.jsonl, problems_eval.jsonl, corpus.jsonl
    data/summary.json

Run: ``python -m flows.prepare`` (or ``dvc repro prepare``).  Test: ``pytest tests/data/test_prepare.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpcrl_core.config import PrepareParams
from hpcrl_core.data.cards import build_card, write_card
from hpcrl_core.data.hygiene import clean_and_split, split_rl, strip_record
from hpcrl_core.data.schema import FAMILIES, Record, write_jsonl
from hpcrl_core.errors import DataError
from hpcrl_core.files import replaced_folder

Progress = Callable[[str], None]


@dataclass
class FamilyOutput:
    """What one family contributes to ``data/``: JSONL files of records, extra JSON files, text files (licence
    notices of the sources), and its card."""

    family: str
    files: dict[str, list[Record]]
    card: dict[str, Any]
    seconds: float = 0.0
    extra_files: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    text_files: dict[str, str] = field(default_factory=dict)


def sources_of(p: PrepareParams, family: str) -> list[tuple[str, Path | None]]:
    """(kind, path) per configured source of a family; paths are checked to exist.

    Raises:
        DataError: a configured path does not exist.
    """
    out: list[tuple[str, Path | None]] = []
    for spec in p.sources.get(family, ("synthetic",)):
        kind, _, raw = spec.partition(":")
        path = Path(raw) if raw else None
        if path is not None and not path.exists():
            raise DataError(f"prepare.sources.{family}: {spec!r}: the path {path} does not exist")
        out.append((kind, path))
    return out


def finish(family: str, records: list[Record], p: PrepareParams, key: Callable[[Record], str], *, strip: bool = False,
           group: Callable[[Record], str] | None = None, extra: dict[str, Any] | None = None,
           t0: float | None = None, rl_fraction: float = 0.0) -> FamilyOutput:
    """Hygiene, split and card for a family's records.

    Records marked ``provenance["held_out"]`` (generated for evaluation only: held-out phrasings, held-out race
    pairs) go to eval outside the 9:1 draw (``hygiene.stratified_split``). Records marked ``provenance["rl"]``
    (generated for RL only) take no part in it either: they go to ``rl.jsonl`` with ``rl_fraction`` of the train
    groups, less any whose question train or eval asks (``hygiene.split_rl``).
    """
    if not records:
        raise DataError(f"family {family}: its sources produced no items")
    marked = [r for r in records if is_rl(r)]
    rest = [r for r in records if not is_rl(r)]
    if not rest:
        raise DataError(f"family {family}: every item is marked for RL only; nothing is left to train or evaluate on")
    train, evals, report = clean_and_split(rest, key, p.eval_fraction, p.seed, strip=strip, group=group,
                                           held_out=is_held_out, raw=p.split == "raw")
    if strip and p.split == "cleaned":
        marked = [strip_record(r)[0] for r in marked]
    train, rl, report.rl_dropped = split_rl(train, evals, marked, key, rl_fraction, p.seed, group=group,
                                            keep_in_train=set(report.conflicts))
    report.train, report.rl = len(train), len(rl)
    card = build_card(family, train, evals, report, extra, rl=rl)
    return FamilyOutput(family, {"train.jsonl": train, "eval.jsonl": evals, "rl.jsonl": rl}, card,
                        time.monotonic() - t0 if t0 else 0.0)


def is_held_out(r: Record) -> bool:
    """Whether a record was generated for evaluation only (``provenance["held_out"]``)."""
    return r.provenance.get("held_out") is True


def is_rl(r: Record) -> bool:
    """Whether a record was generated for RL only (``provenance["rl"]``)."""
    return r.provenance.get("rl") is True


def write_outputs(outputs: list[FamilyOutput], out_dir: Path) -> dict[str, Any]:
    """Write all families into a fresh folder, then swap it in for ``out_dir``; returns the summary.

    Nothing half-written is ever left in ``out_dir``: on any error the temporary folder is removed.
    """
    summary: dict[str, Any] = {"families": {}}
    with replaced_folder(Path(out_dir)) as tmp:
        for o in outputs:
            folder = tmp / o.family
            for name, records in o.files.items():
                write_jsonl(folder / name, records)
            for name, rows in o.extra_files.items():
                (folder / name).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
            for name, text in o.text_files.items():
                (folder / name).write_text(text)
            write_card(o.card, folder)
            summary["families"][o.family] = {**o.card["counts"], "seconds": round(o.seconds, 1)}
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def check_families(outputs: list[FamilyOutput]) -> None:
    missing = set(FAMILIES) - {o.family for o in outputs}
    if missing:
        raise DataError(f"prepare produced no output for {sorted(missing)}")
