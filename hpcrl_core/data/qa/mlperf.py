"""MLPerf factual QA: the facts table, the items generated from it, HPC-GPT's task1_ml_perf.json, and the tiered score.

The facts live in ``facts/mlperf_facts.json`` (one row per fact, each citing its source; see ``facts/SOURCES.md``).
Every row yields one record per question template, up to ``paraphrases`` templates. HPC-GPT's own file plugs in by
path through ``load_hpcgpt_mlperf``. Records of both origins carry the same metadata keys:
``{"topic", "fact_id", "aliases", "partial"}``.

This module also holds the facts-table reader shared with ``plp.py`` (``read_facts_table``, ``pick_templates``).

Run: ``.venv/bin/python -c "from hpcrl_core.data.qa.mlperf import generate_mlperf_items as g; print(len(g(0, 2)))"``.
Test: ``pytest tests/data/qa/test_mlperf.py``.
"""

from __future__ import annotations

import json
import random
import re
import unicodedata
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpcrl_core.data.qa.alpaca import load_alpaca
from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import ConfigError, DataError

FACTS_DIR = Path(__file__).parent / "facts"
MLPERF_FACTS = FACTS_DIR / "mlperf_facts.json"
MLPERF_TOPICS: tuple[str, ...] = ("training", "inference", "hpc", "general")
SOURCE = "synthetic:mlperf-facts@1"
SYSTEM = ("You are an expert on the MLPerf benchmark suites (Training, Inference, HPC). Answer with the short fact "
          "only: a name, a number with its unit, or a short phrase, without explanation.")

_TEXT_FIELDS = ("id", "topic", "answer", "source")


# --- facts tables (shared with plp.py) ---------------------------------------------------------------------------

def read_facts_table(path: Path, topics: tuple[str, ...], list_fields: Mapping[str, bool]) -> list[dict[str, Any]]:
    """Read and validate a facts table: a JSON array of rows.

    Every row has the text fields ``id``, ``topic``, ``answer``, ``source``, a non-empty list ``question_templates``,
    and the list fields named in ``list_fields`` (name -> whether the list must be non-empty). Ids are unique and no
    question appears twice in the table (equal questions with different answers would be conflicts).

    Raises:
        DataError: naming the file, the row index (and id) and the field.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such facts table")
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON at line {err.lineno} column {err.colno} ({err.msg})") from None
    if not isinstance(rows, list) or not rows:
        raise DataError(f"{path}: expected a non-empty JSON array of fact rows, got {type(rows).__name__}")
    seen_ids: dict[str, int] = {}
    seen_questions: dict[str, int] = {}
    for i, row in enumerate(rows):
        _check_row(path, i, row, topics, list_fields)
        if row["id"] in seen_ids:
            raise DataError(f"{path}: row {i}: field 'id' {row['id']!r} repeats row {seen_ids[row['id']]}; "
                            "ids must be unique")
        seen_ids[row["id"]] = i
        for question in row["question_templates"]:
            key = " ".join(question.lower().split())
            if key in seen_questions:
                raise DataError(f"{path}: row {i} (id {row['id']!r}): field 'question_templates' repeats the "
                                f"question {question!r} of row {seen_questions[key]}; reword one of them")
            seen_questions[key] = i
    return rows


def _check_row(path: Path, i: int, row: Any, topics: tuple[str, ...], list_fields: Mapping[str, bool]) -> None:
    if not isinstance(row, dict):
        raise DataError(f"{path}: row {i}: expected an object, got {type(row).__name__}")
    where = f"{path}: row {i} (id {row.get('id')!r})"
    allowed = {*_TEXT_FIELDS, "question_templates", *list_fields}
    unknown = sorted(set(row) - allowed)
    if unknown:
        raise DataError(f"{where}: unknown field(s) {unknown}; allowed: {', '.join(sorted(allowed))}")
    for key in _TEXT_FIELDS:
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise DataError(f"{where}: field {key!r} is missing or not a non-empty string (received {row.get(key)!r})")
    if row["topic"] not in topics:
        raise DataError(f"{where}: field 'topic' is {row['topic']!r}; allowed: {', '.join(topics)}")
    for key, required in {"question_templates": True, **list_fields}.items():
        value = row.get(key)
        if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
            raise DataError(f"{where}: field {key!r} is missing or not a list of non-empty strings "
                            f"(received {value!r})")
        if required and not value:
            raise DataError(f"{where}: field {key!r} is empty; give at least one entry")
    questions = [" ".join(q.lower().split()) for q in row["question_templates"]]
    if len(set(questions)) != len(questions):
        raise DataError(f"{where}: field 'question_templates' lists the same question twice")


def pick_templates(seed: int, fact_id: str, count: int, paraphrases: int) -> list[int]:
    """Indices of the templates a fact contributes: all of them when ``paraphrases >= count``, else a seeded sample.

    The generator is seeded per fact, so adding or editing one row leaves every other row's choice unchanged.

    Raises:
        ConfigError: ``paraphrases`` below 1.
    """
    if paraphrases < 1:
        raise ConfigError(f"paraphrases must be at least 1; received {paraphrases} "
                          "(set prepare.mlperf.paraphrases / prepare.plp.paraphrases in params.yaml to 1 or more)")
    if paraphrases >= count:
        return list(range(count))
    return sorted(random.Random(f"{seed}:{fact_id}").sample(range(count), paraphrases))


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


def fact_records(family: str, facts: list[dict[str, Any]], seed: int, paraphrases: int, system: str, source: str,
                 extra: Callable[[dict[str, Any]], dict[str, Any]]) -> list[Record]:
    """One record per (fact, chosen question template) of a facts table; shared by the MLPerf and PLP families.

    ``metadata`` is ``topic`` and ``fact_id`` plus ``extra(fact)``.
    """
    out = []
    for fact in facts:
        templates = fact["question_templates"]
        for t in pick_templates(seed, fact["id"], len(templates), paraphrases):
            out.append(Record(
                family=family, prompt=messages(system, templates[t]), completion=assistant(fact["answer"]),
                answer=fact["answer"], metadata={"topic": fact["topic"], "fact_id": fact["id"], **extra(fact)},
                provenance={"source": source, "fact_id": fact["id"], "template": t}))
    return out


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
