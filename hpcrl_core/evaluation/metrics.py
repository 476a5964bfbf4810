"""Task metrics: data-race F1, MLPerf exact match / tiered score, and WinRate (the measures of the HARGO paper; the
HARGO trainer itself is not built yet).

Plain functions over predictions and references; the evaluation runner turns their dicts into ``reports/*.json``
(DVC metrics). PLP similarity needs a sentence encoder and lives in ``embeddings.py``.

Run: ``.venv/bin/python -c "from hpcrl_core.evaluation.metrics import race_f1; print(race_f1(['yes'], ['yes']))"``.
Test: ``pytest tests/evaluation/test_metrics.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hpcrl_core.data.qa.mlperf import exact_match, tiered_score
from hpcrl_core.data.schema import Record

# --- reading a yes/no verdict ----------------------------------------------------------------------------------

# The verdict as the first word, after optional markup (quotes, "**", "-", ">") and an optional "Answer:" label.
# "\b" after the word keeps "yesterday" and "nothing" out, and lets "Yes:", "no." and "No," in.
_FIRST_WORD = re.compile(r"^[\W_]*(?:(?:final\s+)?answer\s*[:\-]?[\W_]*)?(yes|no)\b", re.IGNORECASE)

_RACE = r"(?:data[\s-]+)?races?"
# Checked before the positive phrases: "does not contain a data race" holds the positive phrase "contain a data race".
_NEGATIVE = re.compile(
    r"\bno\s+(?:potential\s+|possible\s+)?" + _RACE + r"\b"
    r"|\b(?:does|do|did)\s*(?:not|n't)\s+(?:contain|have|exhibit|include|show)\s+(?:a\s+|an\s+|any\s+)?" + _RACE
    + r"\b"
    r"|\b(?:is|are)\s*(?:not|n't)\s+racy\b"
    r"|\brace[\s-]*free\b"
    r"|\bfree\s+(?:of|from)\s+(?:any\s+)?" + _RACE + r"\b"
    r"|\bwithout\s+(?:a\s+|any\s+)?" + _RACE + r"\b",
    re.IGNORECASE)
_POSITIVE = re.compile(
    r"\b(?:contains?|has|have|exhibits?|includes?)\s+(?:a\s+|an\s+|one\s+|multiple\s+|several\s+)?"
    r"(?:potential\s+|possible\s+)?" + _RACE + r"\b"
    r"|\bthere\s+(?:is|are)\s+(?:a\s+|an\s+)?(?:potential\s+|possible\s+)?" + _RACE + r"\b"
    r"|\b(?:is|are)\s+racy\b",
    re.IGNORECASE)


def parse_race_answer(text: str) -> str | None:
    """The yes/no verdict of a model's response to "Does this program contain a data race?".

    Rules, first match wins:

    1. The first word is ``yes`` or ``no`` (case-insensitive, punctuation after it allowed, optionally after markup
       such as ``**`` or an ``Answer:`` label): that word. "Yesterday ..." and "Nothing ..." do not count.
    2. A negative phrase anywhere ("no data race", "does not contain a data race", "race-free", "free of data
       races", "without a data race", "is not racy"): ``"no"``. Negations are checked first, so they win over the
       positive phrase they contain.
    3. A positive phrase ("contains a data race", "has a data race", "there is a race", "is racy"): ``"yes"``.

    Args:
        text: the model's response.

    Returns:
        ``"yes"``, ``"no"``, or ``None`` when no verdict can be read.
    """
    first = _FIRST_WORD.match(text)
    if first:
        return first.group(1).lower()
    if _NEGATIVE.search(text):
        return "no"
    if _POSITIVE.search(text):
        return "yes"
    return None


# --- data-race F1 ----------------------------------------------------------------------------------------------

def gold_race_label(value: str, index: int) -> str:
    """A race item's gold answer normalised to "yes" or "no" (case and surrounding whitespace ignored).

    Raises:
        ValueError: it is neither (``index`` names the item in the message).
    """
    label = value.strip().lower()
    if label not in ("yes", "no"):
        raise ValueError(f"race_f1: gold[{index}] is {value!r}; allowed: 'yes' or 'no' (a race record's answer)")
    return label


def race_f1(predictions: Sequence[str], gold: Sequence[str]) -> dict[str, float]:
    """Precision, recall and F1 of data-race detection, positive = race ("yes"), pooled over all items.

    Pool C and Fortran by passing both families' items in one call. A prediction is read with
    ``parse_race_answer``; an *unreadable* prediction counts as the opposite of its gold label, so it is always an
    error: a false negative when gold is "yes", a false positive when gold is "no". Refusing to answer thus never
    helps a model. Division by zero yields 0.0 (so a gold set without races and no false positives has precision,
    recall and F1 0.0; read ``accuracy`` and ``tn`` there).

    Args:
        predictions: the model's responses, one per item.
        gold: the reference labels, "yes" or "no" (case and surrounding whitespace ignored).

    Returns:
        ``precision``, ``recall``, ``f1``, ``accuracy`` (0.0 for no items) and the counts ``tp``, ``fp``, ``fn``,
        ``tn``, ``unreadable``, ``n``.

    Raises:
        ValueError: lengths differ, or a gold label is not yes/no.
    """
    if len(predictions) != len(gold):
        raise ValueError(f"race_f1: {len(predictions)} predictions but {len(gold)} gold labels; pass one per item")
    tp = fp = fn = tn = unreadable = 0
    for i, (prediction, reference) in enumerate(zip(predictions, gold, strict=True)):
        truth = gold_race_label(reference, i)
        verdict = parse_race_answer(prediction)
        if verdict is None:
            unreadable += 1
            verdict = "no" if truth == "yes" else "yes"
        if verdict == "yes":
            tp, fp = (tp + 1, fp) if truth == "yes" else (tp, fp + 1)
        else:
            fn, tn = (fn + 1, tn) if truth == "yes" else (fn, tn + 1)
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, tp + fn)
    return {"precision": precision, "recall": recall, "f1": _ratio(2 * precision * recall, precision + recall),
            "accuracy": _ratio(tp + tn, len(gold)), "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "unreadable": unreadable, "n": len(gold)}


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


# --- MLPerf ----------------------------------------------------------------------------------------------------

def mlperf_scores(predictions: Sequence[str], records: Sequence[Record | Mapping[str, Any]]) -> dict[str, float]:
    """Exact-match rate and mean tiered score (1 / 0.5 / 0.2 / 0.1 / 0) of MLPerf answers.

    Both use ``hpcrl_core.data.qa.mlperf.tiered_score`` (exact match is its 1.0 tier), which documents the rule.

    Args:
        predictions: the model's answers, one per record.
        records: ``mlperf`` Records, or mappings with ``answer`` and ``aliases``/``partial`` (top level or under
            ``metadata``).

    Returns:
        ``exact_match`` (fraction in [0, 1]), ``tiered_score`` (mean in [0, 1]) and ``n``; both 0.0 for no items.

    Raises:
        ValueError: lengths differ.
        DataError: a mapping lacks a string ``answer``.
    """
    if len(predictions) != len(records):
        raise ValueError(f"mlperf_scores: {len(predictions)} predictions but {len(records)} records; "
                         "pass one prediction per record")
    scores = [tiered_score(p, r) for p, r in zip(predictions, records, strict=True)]
    exact = sum(exact_match(p, r) for p, r in zip(predictions, records, strict=True))
    n = len(records)
    return {"exact_match": _ratio(exact, n), "tiered_score": _ratio(sum(scores), n), "n": n}


# --- WinRate ---------------------------------------------------------------------------------------------------

def winrate(scores_a: Sequence[float], scores_b: Sequence[float]) -> float:
    """How often system A beats system B item by item: win 1, tie 0.5, loss 0, averaged.

    The HARGO paper compares the trained model's reward on each item with the SFT model's. Ties are exact equality,
    which suits the discrete rewards compared here (tiered scores, 0/1 correctness).

    Args:
        scores_a: per-item scores of system A.
        scores_b: per-item scores of system B, in the same item order.

    Returns:
        The win rate of A over B in [0, 1]; 0.5 means no difference.

    Raises:
        ValueError: lengths differ, or there are no items.
    """
    if len(scores_a) != len(scores_b):
        raise ValueError(f"winrate: {len(scores_a)} scores for A but {len(scores_b)} for B; "
                         "pass one score per item for each system")
    if not scores_a:
        raise ValueError("winrate: no items; pass at least one score per system")
    points = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in zip(scores_a, scores_b, strict=True)]
    return sum(points) / len(points)
