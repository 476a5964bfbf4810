"""Race detection on folders of real programs: how a saved policy answers OpenMP programs it was not trained on.

A folder is read as DataRaceBench lays itself out (``micro-benchmarks/`` for C and C++, ``micro-benchmarks-fortran/``
for Fortran, or the files directly under the folder; the label is the ``-yes`` / ``-no`` at the end of each file
name) by the same loader the prepare stage uses, so comments and names that would give the label away are stripped
first. Every program is asked the training question; answers are greedy and read by ``parse_race_answer``.
Programs too long for the model follow the long-input rule (``generate.fitting_records``): skipped and counted.

The report gives, per folder and language and pooled: precision, recall and F1 with a 95% bootstrap interval over
programs, accuracy, the F1 of answering "yes" to everything (what a model that learned nothing scores), the
separation of the policy's verdict score (``race_scores``: AUC, and the best F1 any threshold on it reaches), and per
pattern name (the file name without its number and label) how many programs were answered right. ``meta`` holds
the wall time and the process's peak resident memory.

Run: ``.venv/bin/python benchmarks/race_transfer.py --model checkpoints/sft/final [FOLDER ...]``.
Test: ``pytest tests/evaluation/test_race_programs.py``.
"""

from __future__ import annotations

import re
import resource
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from transformers import PreTrainedTokenizerBase

from hpcrl_core.data.race.loaders import load_dataracebench
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.generate import fitting_records, generate
from hpcrl_core.evaluation.metrics import parse_race_answer, race_f1
from hpcrl_core.evaluation.race_scores import opens_with, separation, verdict_scores
from hpcrl_core.models.saved import load_saved_policy

LANGUAGES = ("c", "fortran")
RESAMPLES = 2000


def load_programs(root: Path) -> tuple[list[Record], dict[str, str]]:
    """The labelled programs of both languages under ``root`` and a note per language that has none.

    Raises:
        DataError: ``root`` is not a folder, or holds no labelled program of either language.
    """
    if not root.is_dir():
        raise DataError(f"{root}: no such folder of race programs")
    records: list[Record] = []
    notes: dict[str, str] = {}
    for language in LANGUAGES:
        try:
            records += load_dataracebench(root, language, skip_unlabelled=True)
        except DataError as e:
            notes[f"{language}_missing"] = str(e)
    if not records:
        raise DataError(f"{root}: no program named ...-yes or ...-no of either language "
                        f"({'; '.join(notes.values())})")
    return records, notes


def f1_interval(correct_yes: Sequence[bool], predicted_yes: Sequence[bool], seed: int,
                resamples: int = RESAMPLES) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of F1 (positive = race) over programs resampled with replacement."""
    gold, pred = np.asarray(correct_yes, bool), np.asarray(predicted_yes, bool)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(gold), size=(resamples, len(gold)))
    g, p = gold[idx], pred[idx]
    tp = (g & p).sum(1)
    fp = (~g & p).sum(1)
    fn = (g & ~p).sum(1)
    f1 = np.where(2 * tp + fp + fn > 0, 2 * tp / np.maximum(2 * tp + fp + fn, 1), 0.0)
    lo, hi = np.percentile(f1, [2.5, 97.5])
    return float(lo), float(hi)


def score(records: Sequence[Record], answers: Sequence[str], seed: int) -> dict[str, Any]:
    """``race_f1`` of the answers, its interval, and the all-"yes" baseline's F1."""
    gold = [r.answer or "" for r in records]
    out: dict[str, Any] = dict(race_f1(answers, gold))
    parsed = [parse_race_answer(a) for a in answers]
    # an unreadable answer is wrong whatever the label (as race_f1 counts it)
    predicted = [p == "yes" if p is not None else g != "yes" for p, g in zip(parsed, gold, strict=True)]
    out["f1_interval"] = list(f1_interval([g == "yes" for g in gold], predicted, seed)) if records else [0.0, 0.0]
    out["always_yes_f1"] = race_f1(["yes"] * len(gold), gold)["f1"] if records else 0.0
    return out


def scored(records: Sequence[Record], answers: Sequence[str], verdicts: Sequence[float],
           seed: int) -> dict[str, Any]:
    """``score`` of the answers plus, where both labels occur, the verdict scores' ``separation`` (AUC,
    best-threshold F1) under ``"separation"``."""
    out = score(records, answers, seed)
    racy = [r.answer == "yes" for r in records]
    if any(racy) and not all(racy):
        out["separation"] = separation(verdicts, racy)
        # the score reads the first answer token: it means something only where answers open with the verdict
        out["separation"]["verdict_first_share"] = (
            sum(opens_with(a, "yes") or opens_with(a, "no") for a in answers) / len(answers))
    return out


def by_pattern(records: Sequence[Record], answers: Sequence[str]) -> dict[str, dict[str, int]]:
    """Per pattern name (from the file name): programs, right answers, and how many are racy."""
    out: dict[str, dict[str, int]] = {}
    for r, a in zip(records, answers, strict=True):
        name = re.sub(r"^\d+[-_]", "", str(r.metadata.get("pattern")))  # "001-sum" -> "sum"
        row = out.setdefault(name, {"n": 0, "right": 0, "racy": 0})
        row["n"] += 1
        row["right"] += parse_race_answer(a) == r.answer
        row["racy"] += r.answer == "yes"
    return dict(sorted(out.items()))


def evaluate_race_programs(model_dir: Path, roots: Sequence[Path], *, max_new_tokens: int = 128,
                           batch_size: int = 8, seed: int = 0,
                           policy: tuple[Any, PreTrainedTokenizerBase] | None = None) -> dict[str, Any]:
    """Answer every labelled program under each of ``roots`` with the policy saved in ``model_dir`` and score it.
    ``policy``: that folder's model and tokenizer when the caller has already loaded them (it is not loaded again).

    Returns:
        ``{"folders": {root: {"pooled": {...}, "c": {...}, "fortran": {...}, "patterns": {...}, "notes": {...},
        "rows": [{"id", "language", "source_name", "gold", "prediction", "parsed"}]}}, "meta": {"model_dir",
        "seconds", "peak_rss_mb", "programs", "skipped"}}``; each score dict as ``score``.

    Raises:
        DataError: a folder holds no labelled program; ConfigError: no model in ``model_dir``.
    """
    start = time.perf_counter()
    loaded = {root: load_programs(root) for root in roots}
    model, tokenizer = policy if policy is not None else load_saved_policy(model_dir)
    folders: dict[str, Any] = {}
    programs = skipped = 0
    for root, (records, notes) in loaded.items():
        kept = fitting_records(model, tokenizer, records, max_new_tokens, notes)
        programs += len(records)
        skipped += len(records) - len(kept)
        answers = [a[0] for a in generate(model, tokenizer, [r.prompt for r in kept], temperature=0.0,
                                           max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed)]
        verdicts = verdict_scores(model, tokenizer, [r.prompt for r in kept])
        part: dict[str, Any] = {"pooled": scored(kept, answers, verdicts, seed)}
        for language in LANGUAGES:
            idx = [i for i, r in enumerate(kept) if r.metadata["language"] == language]
            if idx:
                part[language] = scored([kept[i] for i in idx], [answers[i] for i in idx],
                                        [verdicts[i] for i in idx], seed)
        part["patterns"] = by_pattern(kept, answers)
        part["notes"] = notes
        part["rows"] = [{"id": r.id, "language": r.metadata["language"], "source_name": r.metadata["source_name"],
                         "gold": r.answer, "prediction": a, "parsed": parse_race_answer(a), "verdict_score": v}
                        for r, a, v in zip(kept, answers, verdicts, strict=True)]
        folders[str(root)] = part
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return {"folders": folders, "meta": {"model_dir": str(model_dir), "seconds": round(time.perf_counter() - start, 1),
                                         "peak_rss_mb": round(peak_kb / 1024, 1), "programs": programs,
                                         "skipped": skipped}}


def summary_lines(report: dict[str, Any]) -> list[str]:
    """A table a person reads: one line per folder and language, then the pooled line, then the run's cost."""
    lines = [f"{'folder':<40} {'lang':<8} {'n':>4} {'prec':>5} {'rec':>5} {'F1':>5} {'95% CI':>13} {'acc':>5} "
             f"{'yes-F1':>6} {'AUC':>5} {'bestF1':>6}"]
    for root, part in report["folders"].items():
        for key in (*LANGUAGES, "pooled"):
            if key in part:
                s = part[key]
                lo, hi = s["f1_interval"]
                sep = s.get("separation")
                tail = f" {sep['auc']:>5.2f} {sep['best_threshold_f1']:>6.2f}" if sep else f" {'-':>5} {'-':>6}"
                lines.append(f"{root[-40:]:<40} {key:<8} {s['n']:>4} {s['precision']:>5.2f} {s['recall']:>5.2f} "
                             f"{s['f1']:>5.2f} [{lo:.2f}, {hi:.2f}] {s['accuracy']:>5.2f} {s['always_yes_f1']:>6.2f}"
                             + tail)
        for note in part["notes"].values():
            lines.append(f"  note: {note}")
        first = part.get("pooled", {}).get("separation", {}).get("verdict_first_share")
        if first is not None and first < 0.9:
            lines.append(f"  note: only {first:.0%} of the answers open with yes or no, so AUC and bestF1, which read "
                         "the first answer token, say little about this policy")
    m = report["meta"]
    lines.append(f"{m['programs']} programs ({m['skipped']} skipped as too long) in {m['seconds']} s; peak memory "
                 f"{m['peak_rss_mb']} MB; model {m['model_dir']}")
    return lines
