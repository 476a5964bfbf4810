"""Data hygiene: deduplication, conflicting gold answers, label leaks, and a leak-free stratified split.

Every action is counted in a ``HygieneReport`` that goes into the family's data card:
- exact duplicates (same content hash of prompt + completion) are dropped, the first kept;
- questions asked more than once with different gold answers are conflicts: all their items are flagged
  (``metadata`` is left alone; the ids are listed) and kept out of evaluation (they go to train);
- identifiers that leak a race label (``DRB001-antidep1-orig-yes``, ``foo_yes``) are stripped from prompts;
- the split is stratified by a key (the label, the technique set ...) with a fixed seed, 9:1 by default; items of
  one group (paraphrases of one fact, prompts paired with one kernel) stay on one side; and no content hash
  appears in both train and eval (checked, not assumed);
- items generated for evaluation only (held-out phrasings of a fact, held-out race pairs; ``held_out``) go to eval
  with their whole group, outside the 9:1 draw, so the other items split exactly as without them; a held-out group
  that holds a conflicting item goes to train like every conflict;
- an eval item whose question train also asks (with the same answer: conflicts are in train already) moves to
  train with its group, so no eval question is a training question; ``raw`` skips every cleaning step instead (the
  paper-faithful split of the raw records: no leak stripping, no dedupe, no conflict handling) and only counts the
  eval items with an exact or a conflicting twin in train (``question_twins``), to show what cleaning changes;
- the RL split (``split_rl``): items generated for RL only (``rl``) and, with a fraction, a share of train's groups
  drawn after the 9:1 split; an RL item whose question is also asked in train or eval is dropped (counted), so RL
  never asks what SFT trained on or what evaluation asks.

Test: ``pytest tests/data/test_hygiene.py``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from hpcrl_core.data.schema import Record
from hpcrl_core.data.stable import stable_unit
from hpcrl_core.errors import DataError

_LEAKS = (
    re.compile(r"\bDRB\d+[-\w]*?[-_](?:orig|var)[-_](?:yes|no)\b(?:\.(?:c|cpp|f90|f95|F90))?", re.IGNORECASE),
    re.compile(r"\bDRB\d+[-\w]*", re.IGNORECASE),
    re.compile(r"\b(\w+?)_(?:yes|no)\b"),
)


@dataclass
class HygieneReport:
    """What hygiene did to one family."""

    input_items: int = 0
    duplicates_dropped: int = 0
    conflicts: list[str] = field(default_factory=list)  # ids of items whose question has conflicting answers
    leaks_stripped: int = 0
    train: int = 0
    eval: int = 0
    overlap_checked: bool = False
    held_out: int = 0  # eval items that were generated for eval only (not drawn by the 9:1 split)
    split: str = "cleaned"  # or "raw" (clean_and_split)
    twins_moved: int = 0  # eval items moved to train because train asked their question
    eval_exact_twins: int = 0  # eval items whose question train asks with the same answer (raw split only)
    eval_conflicting_twins: int = 0  # ... with another answer (raw split only)
    rl: int = 0  # RL-only items (split_rl)
    rl_dropped: int = 0  # RL items dropped because train, eval or an earlier RL item asks the same question

    def as_dict(self) -> dict[str, object]:
        return {"input_items": self.input_items, "duplicates_dropped": self.duplicates_dropped,
                "conflicting_items": len(self.conflicts), "conflict_ids": self.conflicts[:50],
                "leaks_stripped": self.leaks_stripped, "train": self.train, "eval": self.eval,
                "eval_held_out": self.held_out, "train_eval_overlap": 0 if self.overlap_checked else None,
                "split": self.split, "eval_twins_moved_to_train": self.twins_moved,
                "eval_exact_twins_in_train": self.eval_exact_twins,
                "eval_conflicting_twins_in_train": self.eval_conflicting_twins,
                "rl": self.rl, "rl_dropped_asked_elsewhere": self.rl_dropped}


def strip_leaks(text: str) -> tuple[str, int]:
    """Remove label-leaking identifiers; returns the text and how many were replaced."""
    count = 0

    def _sub(pattern: re.Pattern[str], repl: str | Callable[[re.Match[str]], str], s: str) -> str:
        nonlocal count
        s, k = pattern.subn(repl, s)
        count += k
        return s

    text = _sub(_LEAKS[0], "the program", text)
    text = _sub(_LEAKS[1], "the program", text)
    text = _sub(_LEAKS[2], lambda m: m.group(1), text)
    return text, count


def strip_record(r: Record) -> tuple[Record, int]:
    """The record with label-leaking identifiers stripped from its prompt (a new id when any was), and how many."""
    total = 0
    prompt = []
    for m in r.prompt:
        content, k = strip_leaks(m["content"])
        total += k
        prompt.append({**m, "content": content})
    return (replace(r, prompt=prompt, id="") if total else r), total


def dedupe(records: Sequence[Record]) -> tuple[list[Record], int]:
    """Drop exact duplicates (by content hash), keeping the first."""
    seen: set[str] = set()
    out = []
    for r in records:
        h = r.content_hash()
        if h not in seen:
            seen.add(h)
            out.append(r)
    return out, len(records) - len(out)


def find_conflicts(records: Sequence[Record]) -> set[str]:
    """Ids of items whose (normalised) question also appears with a different gold answer."""
    answers: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r.answer:
            answers[r.question_hash()].add(r.answer.strip().lower())
    bad = {q for q, a in answers.items() if len(a) > 1}
    return {r.id for r in records if r.question_hash() in bad}


Grouper = Callable[[Record], str]
Selector = Callable[[Record], bool]


def stratified_split(records: Sequence[Record], key: Grouper, eval_fraction: float, seed: int,
                     never_eval: set[str] | None = None, group: Grouper | None = None,
                     held_out: Selector | None = None) -> tuple[list[Record], list[Record]]:
    """Split each stratum ``eval_fraction`` : rest, fixed by the seed and the group names.

    Args:
        records: the items.
        key: the stratum of an item (its label, topic, technique set ...).
        eval_fraction: share of each stratum's groups that goes to eval.
        seed: fixes which groups go to eval.
        never_eval: ids that always go to train (conflicts); their whole group goes with them.
        group: items with the same group (paraphrases of one fact, prompts of one kernel) stay on one side;
            by default each item is its own group.
        held_out: items made for eval only; a group holding one goes to eval (to train if it holds a
            ``never_eval`` id) and takes no part in the draw, so the other groups split as without it.
    """
    never_eval = never_eval or set()
    group = group or (lambda r: r.id)
    held_out = held_out or (lambda r: False)
    strata: dict[str, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        strata[key(r)][group(r)].append(r)
    train: list[Record] = []
    evals: list[Record] = []
    for name in sorted(strata):
        # Ordered by a hash of (seed, stratum, group), not shuffled by a seeded stream: a group more or less in one
        # stratum moves no other group across the split (hpcrl_core.data.stable).
        groups = [strata[name][g] for g in sorted(strata[name], key=lambda g: stable_unit("split", seed, name, g))]
        barred = [any(r.id in never_eval for r in g) for g in groups]
        held = [not bar and any(held_out(r) for r in g) for g, bar in zip(groups, barred, strict=True)]
        eligible = [g for g, bar, h in zip(groups, barred, held, strict=True) if not bar and not h]
        k = round(len(eligible) * eval_fraction) if len(eligible) > 1 else 0
        chosen = {id(g) for g in eligible[:k]} | {id(g) for g, h in zip(groups, held, strict=True) if h}
        for g in groups:
            (evals if id(g) in chosen else train).extend(g)
    return train, evals


def clean_and_split(records: Sequence[Record], key: Grouper, eval_fraction: float, seed: int, strip: bool = False,
                    group: Grouper | None = None, held_out: Selector | None = None,
                    raw: bool = False) -> tuple[list[Record], list[Record], HygieneReport]:
    """The whole hygiene pass for one family (``held_out``: items made for eval only, see ``stratified_split``).

    With ``raw``, none of it: the same draw over the records as they came (the paper-faithful split), with the eval
    items that have an exact or a conflicting twin in train counted (``question_twins``), not removed.

    Raises:
        DataError: if, after all, a content hash is in both train and eval of the cleaned split (a bug, never silent).
    """
    report = HygieneReport(input_items=len(records), split="raw" if raw else "cleaned")
    items = list(records)
    if raw:
        train, evals = stratified_split(items, key, eval_fraction, seed, group=group, held_out=held_out)
        report.eval_exact_twins, report.eval_conflicting_twins = question_twins(train, evals)
        report.train, report.eval = len(train), len(evals)
        report.held_out = sum(1 for r in evals if held_out and held_out(r))
        return train, evals, report
    if strip:
        stripped = [strip_record(r) for r in items]
        items = [r for r, _ in stripped]
        report.leaks_stripped = sum(k for _, k in stripped)
    items, report.duplicates_dropped = dedupe(items)
    conflicts = find_conflicts(items)
    report.conflicts = sorted(conflicts)
    train, evals = stratified_split(items, key, eval_fraction, seed, never_eval=conflicts, group=group,
                                    held_out=held_out)
    train, evals, report.twins_moved = _move_twins(train, evals, group or (lambda r: r.id))
    overlap = {r.content_hash() for r in train} & {r.content_hash() for r in evals}
    if overlap:
        raise DataError(f"{len(overlap)} items are in both train and eval after the split (hygiene bug)")
    report.train, report.eval, report.overlap_checked = len(train), len(evals), True
    report.held_out = sum(1 for r in evals if held_out and held_out(r))
    return train, evals, report


def _answer(r: Record) -> str:
    return (r.answer or r.response).strip().lower()


def question_twins(train: Sequence[Record], evals: Sequence[Record]) -> tuple[int, int]:
    """(exact, conflicting): eval items whose question (whitespace and case normalised) train asks with the same
    gold answer, and with only other answers."""
    asked: dict[str, set[str]] = defaultdict(set)
    for r in train:
        asked[r.question_hash()].add(_answer(r))
    exact = sum(1 for r in evals if _answer(r) in asked.get(r.question_hash(), ()))
    conflicting = sum(1 for r in evals if r.question_hash() in asked and _answer(r) not in asked[r.question_hash()])
    return exact, conflicting


def _move_twins(train: list[Record], evals: list[Record], group: Grouper) -> tuple[list[Record], list[Record], int]:
    """Eval items whose question train asks move to train with their whole group; returns how many moved."""
    asked = {r.question_hash() for r in train}
    moving = {group(r) for r in evals if r.question_hash() in asked}
    if not moving:
        return train, evals, 0
    moved = [r for r in evals if group(r) in moving]
    return train + moved, [r for r in evals if group(r) not in moving], len(moved)


def split_rl(train: Sequence[Record], evals: Sequence[Record], marked: Sequence[Record], key: Grouper,
             fraction: float, seed: int, group: Grouper | None = None,
             keep_in_train: set[str] | None = None) -> tuple[list[Record], list[Record], int]:
    """The RL split, taken after ``clean_and_split``: prompts for RL that SFT never trains on and eval never asks.

    Args:
        train, evals: the 9:1 split of the other items.
        marked: items generated for RL only.
        fraction: share of each stratum's train groups that moves to RL as well (0: none), marked
            ``provenance["rl"]`` like the generated ones; drawn like the eval split, so the same seed and groups give
            the same RL items.
        keep_in_train: ids that never move (conflicts), with their group.

    Returns:
        (train, rl, dropped): train less the moved groups; the RL items; how many RL items were dropped because
        train, eval or an earlier RL item asks the same question (whitespace and case normalised).
    """
    train = list(train)
    moved: list[Record] = []
    if fraction > 0:
        train, drawn = stratified_split(train, key, fraction, seed, never_eval=keep_in_train, group=group)
        moved = [replace(r, provenance={**r.provenance, "rl": True}) for r in drawn]
    asked = {r.question_hash() for r in [*train, *evals]}
    rl: list[Record] = []
    for r in [*moved, *marked]:
        if r.question_hash() not in asked:  # nor twice in RL
            asked.add(r.question_hash())
            rl.append(r)
    return train, rl, len(moved) + len(marked) - len(rl)
