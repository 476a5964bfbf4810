"""Data cards: one per family, as JSON (machine-readable, logged to MLflow) and markdown (for people).

A card carries counts per split, label balance, lengths (characters and whitespace words of prompt and
completion), the sources, every hygiene action, the records quarantined from file sources (count per source, and
each with its record index or path and the reason), and family-specific extras (the DGEMM corpus's GFLOPS
distribution, ThreadSanitizer agreement for C race items).

Test: ``pytest tests/data/test_prepare.py`` (cards built, rendered and written with the data).
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.data.hygiene import HygieneReport
from hpcrl_core.data.quarantine import quarantine_markdown
from hpcrl_core.data.schema import Record
from hpcrl_core.files import write_text_atomic


def _lengths(values: Sequence[int]) -> dict[str, float]:
    if not values:
        return {}
    s = sorted(values)
    return {"min": s[0], "mean": round(statistics.fmean(s), 1), "p50": s[len(s) // 2],
            "p95": s[min(len(s) - 1, int(0.95 * len(s)))], "max": s[-1]}


def _label(r: Record) -> str:
    meta = r.metadata
    for key in ("label", "topic"):
        if meta.get(key) is not None:
            return str(meta[key])
    if "stage" in meta:
        return f"stage {meta['stage']}"
    return "-"


def build_card(family: str, train: Sequence[Record], evals: Sequence[Record], report: HygieneReport,
               extra: dict[str, Any] | None = None, rl: Sequence[Record] = ()) -> dict[str, Any]:
    """The card of one family (``rl``: its RL-only prompts, counted apart from train and eval)."""
    items = list(train) + list(evals) + list(rl)
    return {
        "family": family,
        "counts": {"train": len(train), "eval": len(evals), "rl": len(rl), "total": len(items)},
        "label_balance": {"train": dict(Counter(_label(r) for r in train).most_common()),
                          "eval": dict(Counter(_label(r) for r in evals).most_common()),
                          "rl": dict(Counter(_label(r) for r in rl).most_common())},
        "lengths": {
            "prompt_chars": _lengths([sum(len(m["content"]) for m in r.prompt) for r in items]),
            "prompt_words": _lengths([sum(len(m["content"].split()) for m in r.prompt) for r in items]),
            "completion_chars": _lengths([len(r.response) for r in items if r.completion]),
            "completion_words": _lengths([len(r.response.split()) for r in items if r.completion]),
        },
        "sources": dict(Counter(str(r.provenance.get("source", "?")) for r in items)),
        "hygiene": report.as_dict(),
        **({"extra": extra} if extra else {}),
    }


def card_markdown(card: dict[str, Any]) -> str:
    """A readable rendering of a card."""
    c = card["counts"]
    lines = [f"# Data card: {card['family']}", "",
             f"- items: {c['total']} (train {c['train']}, eval {c['eval']}, RL only {c.get('rl', 0)})",
             f"- sources: {', '.join(f'{k} ({v})' for k, v in card['sources'].items())}", "", "## Label balance", "",
             "| label | train | eval | RL |", "|---|---|---|---|"]
    balance = card["label_balance"]
    for lab in sorted(set(balance["train"]) | set(balance["eval"]) | set(balance.get("rl", {}))):
        lines.append(f"| {lab} | {balance['train'].get(lab, 0)} | {balance['eval'].get(lab, 0)} | "
                     f"{balance.get('rl', {}).get(lab, 0)} |")
    lines += ["", "## Lengths", "", "| measure | min | mean | p50 | p95 | max |", "|---|---|---|---|---|---|"]
    for name, st in card["lengths"].items():
        if st:
            lines.append(f"| {name} | {st['min']} | {st['mean']} | {st['p50']} | {st['p95']} | {st['max']} |")
    lines += ["", "## Hygiene", ""] + [f"- {k}: {v}" for k, v in card["hygiene"].items() if k != "conflict_ids"]
    if card["hygiene"].get("conflict_ids"):
        lines.append(f"- conflicting item ids (first 50): {', '.join(card['hygiene']['conflict_ids'])}")
    if card.get("quarantine"):
        lines += quarantine_markdown(card["quarantine"])
    if card.get("notices"):
        lines += ["", "## Licence notices", ""] + [f"- `{name}`: {what}" for name, what in card["notices"].items()]
    if card.get("extra"):
        lines += ["", "## Details", "", "```json", json.dumps(card["extra"], indent=2, default=str), "```"]
    return "\n".join(lines) + "\n"


def write_card(card: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """Write ``card.json`` and ``card.md`` into the family's folder (atomically)."""
    paths = (folder / "card.json", folder / "card.md")
    write_text_atomic(paths[0], json.dumps(card, indent=2, default=str) + "\n")
    write_text_atomic(paths[1], card_markdown(card))
    return paths
