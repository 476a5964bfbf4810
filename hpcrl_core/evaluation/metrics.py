"""Task metrics: data-race F1 and verdict parsing, MLPerf exact match / tiered score, and WinRate (the measures of
the HARGO paper).

Plain functions over predictions and references; the evaluation runner turns their dicts into ``reports/*.json``
(DVC metrics). PLP similarity needs a sentence encoder and lives in ``embeddings.py``.

Run: ``.venv/bin/python -c "from hpcrl_core.evaluation.metrics import race_f1; print(race_f1(['yes'], ['yes']))"``.
Test: ``pytest tests/evaluation/test_metrics.py``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from hpcrl_core.data.schema import Record
from hpcrl_core.errors import DataError

# --- MLPerf tiered score -----------------------------------------------------------------------------------------

# A token is a run of letters, digits, "+" or "#" (so C++, C# and DeepLabv3+ survive), plus any ".digits" suffixes
# (so 0.908, v1.5 and 3.1 keep their decimal point). Everything else separates tokens.
_TOKEN = re.compile(r"(?:[^\W_]|[+#])+(?:\.\d+)*")

_STOPWORDS = frozenset(["a", "an", "the", "of", "and", "or", "in", "on", "for", "to", "with", "by", "at", "as", "from",
                        "is", "are", "was", "were", "be", "it", "its", "this", "that"])


def normalize_tokens(text: str) -> list[str]:
    """The tokens the score compares: NFKC, case-folded, punctuation and whitespace dropped."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def _compact(text: str) -> str:
    return "".join(normalize_tokens(text))


def _contains_phrase(tokens: list[str], target: str) -> bool:
    """Whether a contiguous run of whole tokens concatenates to ``target`` (a compact form)."""
    for start in range(len(tokens)):
        joined = ""
        for tok in tokens[start:]:
            joined += tok
            if joined == target:
                return True
            if not target.startswith(joined):
                break
    return False


def _reference_fields(reference: Record | Mapping[str, Any]) -> tuple[str, list[str], list[str]]:
    if isinstance(reference, Record):
        answer, fields = reference.answer, dict(reference.metadata)
    else:
        if not isinstance(reference.get("answer"), str):
            raise DataError(f"tiered_score: reference lacks a string 'answer' (received keys {sorted(reference)})")
        answer = reference["answer"]
        fields = {**(reference.get("metadata") or {}), **{k: reference[k] for k in ("aliases", "partial")
                                                           if k in reference}}
    return answer, list(fields.get("aliases") or []), list(fields.get("partial") or [])


def tiered_score(prediction: str, reference: Record | Mapping[str, Any]) -> float:
    """HPC-GPT's tiered MLPerf score (1 / 0.5 / 0.2 / 0.1 / 0), with this project's precise rule.

    HPC-GPT states the tiers without a formal rule; hpcrl defines them as follows. Texts are compared as tokens
    (``normalize_tokens``): NFKC, case-folded; a token is a run of letters, digits, ``+`` or ``#`` with optional
    ``.digits`` suffixes, so case, whitespace and punctuation do not matter but decimal points do ("0.908" is not
    "908"). The *compact form* of a text is its tokens joined without separators. The references are the answer and
    its aliases; the first tier that holds wins:

    - **1.0 exact**: the prediction's compact form equals a reference's ("resnet 50 v1.5." = "ResNet-50 v1.5").
    - **0.5 contained or partial**: a run of whole prediction tokens concatenates to a reference's compact form (the
      reference appears as a phrase on word boundaries: "It is ResNet-50 v1.5" yes, "ResNet-500" no), or the
      prediction's compact form equals a ``partial`` entry's.
    - **0.2 key tokens**: for some reference with content tokens C (its distinct tokens minus a few stopwords such as
      "the", "of", "and"), the prediction contains at least half of C as whole tokens (2·shared >= |C|, shared >= 1).
    - **0.1 one token**: the prediction contains at least one content token of some reference.
    - **0.0** otherwise, and for a prediction without any token.

    Known limitation: a hedge that lists several candidates can reach 0.5 by containment; rewards that care should
    penalise length separately.

    Args:
        prediction: the model's answer.
        reference: an ``mlperf`` Record, or a mapping with ``answer`` and ``aliases``/``partial`` at the top level or
            under ``metadata`` (the columns a reward function receives).
    """
    answer, aliases, partial = _reference_fields(reference)
    tokens = normalize_tokens(prediction)
    if not tokens:
        return 0.0
    compact = "".join(tokens)
    refs = [c for c in (_compact(r) for r in [answer, *aliases]) if c]
    if compact in refs:
        return 1.0
    if any(_contains_phrase(tokens, r) for r in refs) or compact in {_compact(p) for p in partial}:
        return 0.5
    predicted = set(tokens)
    shares = []
    for ref in [answer, *aliases]:
        content = set(normalize_tokens(ref)) - _STOPWORDS
        if content:
            shares.append((len(content & predicted), len(content)))
    if any(shared and 2 * shared >= size for shared, size in shares):
        return 0.2
    return 0.1 if any(shared for shared, _ in shares) else 0.0


def exact_match(prediction: str, reference: Record | Mapping[str, Any]) -> bool:
    """Whether the prediction is the answer or an alias, up to case, whitespace and punctuation (the 1.0 tier)."""
    return tiered_score(prediction, reference) == 1.0


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

    Both use ``tiered_score`` (exact match is its 1.0 tier), which documents the rule.

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
