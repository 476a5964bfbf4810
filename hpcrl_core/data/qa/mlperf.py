"""MLPerf factual QA: the facts table, the items generated from it, HPC-GPT's task1_ml_perf.json, and the tiered score.

The facts live in ``facts/mlperf_facts.json`` (one row per fact, each citing its source; see ``facts/SOURCES.md``).
Every row yields one record per question template, up to ``paraphrases`` templates. HPC-GPT's own file plugs in by
path through ``load_hpcgpt_mlperf``. Records of both origins carry the same metadata keys:
``{"topic", "fact_id", "aliases", "partial"}``.

The table is read, validated and turned into records by ``tables`` (shared with ``plp``).

Run: ``.venv/bin/python -c "from hpcrl_core.data.qa.mlperf import generate_mlperf_items as g; print(len(g(0, 2)))"``.
Test: ``pytest tests/data/qa/test_mlperf.py``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hpcrl_core.data.qa.alpaca import load_alpaca
from hpcrl_core.data.qa.tables import FACTS_DIR, fact_records, read_facts_table
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import DataError

MLPERF_FACTS = FACTS_DIR / "mlperf_facts.json"
MLPERF_TOPICS: tuple[str, ...] = ("training", "inference", "hpc", "general")
SOURCE = "synthetic:mlperf-facts@1"
SYSTEM = ("You are an expert on the MLPerf benchmark suites (Training, Inference, HPC). Answer with the short fact "
          "only: a name, a number with its unit, or a short phrase, without explanation.")


# --- MLPerf items ------------------------------------------------------------------------------------------------

def load_mlperf_facts(path: Path | None = None) -> list[dict[str, Any]]:
    """The validated MLPerf facts table (the packaged one unless ``path`` is given).

    Raises:
        DataError: naming the file, the row and the field of the first problem.
    """
    return read_facts_table(path or MLPERF_FACTS, MLPERF_TOPICS, {"aliases": False, "partial": False})


def generate_mlperf_items(seed: int, paraphrases: int, path: Path | None = None) -> list[Record]:
    """One ``mlperf`` record per (fact, chosen question template), in table order.

    Args:
        seed: picks which templates a fact uses when it has more than ``paraphrases``; same seed, same items.
        paraphrases: at most this many templates per fact (>= 1).
        path: a facts table other than the packaged one.
    """
    return fact_records("mlperf", load_mlperf_facts(path), seed, paraphrases, SYSTEM, SOURCE,
                        lambda f: {"aliases": list(f["aliases"]), "partial": list(f["partial"])})


def load_hpcgpt_mlperf(path: Path) -> list[Record]:
    """HPC-GPT's ``task1_ml_perf.json`` (Alpaca: instruction, input, output) as ``mlperf`` records.

    The output is both the completion and the reference answer; the file has no aliases or partial answers.

    Raises:
        DataError: naming the file, the record index and the field.
    """
    return load_alpaca(path, "mlperf", system=SYSTEM,
                       metadata=lambda _rec: {"topic": None, "fact_id": None, "aliases": [], "partial": []})


# --- tiered score ------------------------------------------------------------------------------------------------

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
