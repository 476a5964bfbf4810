"""Facts tables, the source of the synthetic QA families (``mlperf``, ``plp``): reading and validating a table, and
turning its rows into records, one per chosen question template.

A table is a JSON array in ``facts/`` (``facts/SOURCES.md`` says where every row comes from); each family module
(``mlperf``, ``plp``) names its table, its topics and its extra list fields, and builds its records here. A row's
``question_templates`` are the wordings training may use; its ``held_out_templates`` are asked only in evaluation
(``hold_out: phrasing``), so that eval tests whether a trained fact is known in words never trained on.

Test: ``pytest tests/data/qa/test_tables.py tests/data/qa/test_mlperf.py tests/data/qa/test_plp.py``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hpcrl_core.data.schema import Record, assistant, messages
from hpcrl_core.errors import ConfigError, DataError

FACTS_DIR = Path(__file__).parent / "facts"  # packaged with hpcrl_core.data.qa (pyproject.toml package-data)

_TEXT_FIELDS = ("id", "topic", "answer", "source")
# Optional: the round ("v3.0") or suite ("datacenter") the answer holds for. A row that has one must name it in every
# question template: an answer true in one round only, asked without the round, is a question with no right answer.
_SCOPE_FIELDS = ("round", "suite")
_ROUND = re.compile(r"v\d+(?:\.\d+)*")
HELD_OUT = "held_out_templates"  # wordings only evaluation asks: never trained, so eval tests unseen phrasings


def read_facts_table(path: Path, topics: tuple[str, ...], list_fields: Mapping[str, bool]) -> list[dict[str, Any]]:
    """Read and validate a facts table: a JSON array of rows.

    Every row has the text fields ``id``, ``topic``, ``answer``, ``source``, a non-empty list ``question_templates``,
    and the list fields named in ``list_fields`` (name -> whether the list must be non-empty). It may have
    ``held_out_templates``: wordings only evaluation asks (``prepare.<family>.eval_phrasings``), never trained on.
    Ids are unique and no question appears twice in the table, trained or held out (equal questions with different
    answers would be conflicts; a held-out wording equal to a trained one would not be held out). A row whose answer
    holds for one round or suite only carries ``round`` ("v3.0") or ``suite`` ("datacenter"), and then every question
    template, held-out ones included, must name it.

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
        for field_name, question in _questions(row):
            key = " ".join(question.lower().split())
            if key in seen_questions:
                raise DataError(f"{path}: row {i} (id {row['id']!r}): field {field_name!r} repeats the "
                                f"question {question!r} of row {seen_questions[key]}; reword one of them")
            seen_questions[key] = i
    return rows


def _check_row(path: Path, i: int, row: Any, topics: tuple[str, ...], list_fields: Mapping[str, bool]) -> None:
    if not isinstance(row, dict):
        raise DataError(f"{path}: row {i}: expected an object, got {type(row).__name__}")
    where = f"{path}: row {i} (id {row.get('id')!r})"
    allowed = {*_TEXT_FIELDS, *_SCOPE_FIELDS, "question_templates", HELD_OUT, *list_fields}
    unknown = sorted(set(row) - allowed)
    if unknown:
        raise DataError(f"{where}: unknown field(s) {unknown}; allowed: {', '.join(sorted(allowed))}")
    for key in _TEXT_FIELDS:
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise DataError(f"{where}: field {key!r} is missing or not a non-empty string (received {row.get(key)!r})")
    if row["topic"] not in topics:
        raise DataError(f"{where}: field 'topic' is {row['topic']!r}; allowed: {', '.join(topics)}")
    for key, required in {"question_templates": True, **list_fields, HELD_OUT: False}.items():
        if key == HELD_OUT and key not in row:
            continue
        value = row.get(key)
        if not isinstance(value, list) or not all(isinstance(s, str) and s.strip() for s in value):
            raise DataError(f"{where}: field {key!r} is missing or not a list of non-empty strings "
                            f"(received {value!r})")
        if required and not value:
            raise DataError(f"{where}: field {key!r} is empty; give at least one entry")
    questions = [" ".join(q.lower().split()) for _, q in _questions(row)]
    if len(set(questions)) != len(questions):
        raise DataError(f"{where}: fields 'question_templates' and {HELD_OUT!r} list the same question twice")
    _check_scope(where, row)


def _check_scope(where: str, row: dict[str, Any]) -> None:
    """``round`` / ``suite``, when present: a well-formed value that every question template names."""
    for key in _SCOPE_FIELDS:
        if key not in row:
            continue
        value = row[key]
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"{where}: field {key!r} must be a non-empty string (received {value!r})")
        if key == "round" and not _ROUND.fullmatch(value):
            raise DataError(f"{where}: field 'round' is {value!r}; give the round as MLCommons names it, e.g. 'v0.7' "
                            "or 'v3.0'")
        named = re.compile(rf"(?<![\w.]){re.escape(value)}(?!\w|\.\d)", re.IGNORECASE)
        for _, question in _questions(row):
            if not named.search(question):
                raise DataError(f"{where}: field {key!r} is {value!r}, but the question template {question!r} does "
                                f"not name it; the answer holds only for that {key}, so every question must say "
                                f"{value!r} (reword the question), or drop the field if the answer holds in every "
                                f"{key}")


def _questions(row: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, question) for every trained and held-out template of a row."""
    return [(key, q) for key in ("question_templates", HELD_OUT) for q in row.get(key, [])]


def pick_templates(seed: int, fact_id: str, count: int, paraphrases: int, stream: str = "") -> list[int]:
    """Indices of the templates a fact contributes: all of them when ``paraphrases >= count``, else a seeded sample.

    The generator is seeded per fact (and ``stream``: held-out templates draw apart from trained ones), so adding or
    editing one row leaves every other row's choice unchanged.

    Raises:
        ConfigError: ``paraphrases`` below 1.
    """
    if paraphrases < 1:
        raise ConfigError(f"paraphrases must be at least 1; received {paraphrases} "
                          "(set prepare.mlperf.paraphrases / prepare.plp.paraphrases in params.yaml to 1 or more)")
    if paraphrases >= count:
        return list(range(count))
    return sorted(random.Random(f"{seed}:{fact_id}{stream}").sample(range(count), paraphrases))


def fact_records(family: str, facts: list[dict[str, Any]], seed: int, paraphrases: int, system: str, source: str,
                 extra: Callable[[dict[str, Any]], dict[str, Any]], eval_phrasings: int = 0,
                 rl_phrasings: int = 0) -> list[Record]:
    """One record per (fact, chosen question template) of a facts table; shared by the MLPerf and PLP families.

    Of each fact's chosen templates, ``rl_phrasings`` (a seeded pick apart from the others, at most all but one) are
    marked ``provenance["rl"] = True``: the prepare stage puts them in the RL split, never in SFT or eval. Then, after
    every trained record (so those stay exactly as without them), up to ``eval_phrasings`` records per fact from its
    ``held_out_templates``, marked ``provenance["held_out"] = True``: the prepare stage puts them in eval only.
    ``provenance["template"]`` indexes the list the question came from. ``metadata`` is ``topic`` and ``fact_id``
    plus ``extra(fact)``.

    Raises:
        ConfigError: ``paraphrases`` below 1, ``eval_phrasings`` or ``rl_phrasings`` below 0.
    """
    for name, value in (("eval_phrasings", eval_phrasings), ("rl_phrasings", rl_phrasings)):
        if value < 0:
            raise ConfigError(f"{name} must be 0 or more; received {value} (set prepare.mlperf.{name} / "
                              f"prepare.plp.{name} in params.yaml to 0 or more)")
    out = []
    for fact in facts:
        templates = fact["question_templates"]
        chosen = pick_templates(seed, fact["id"], len(templates), paraphrases)
        keep = min(rl_phrasings, len(chosen) - 1)
        rl = set(random.Random(f"{seed}:{fact['id']}:rl").sample(chosen, keep)) if keep > 0 else set()
        for t in chosen:
            provenance = {"source": source, "fact_id": fact["id"], "template": t}
            out.append(_fact_record(family, fact, templates[t], system, extra,
                                    {**provenance, "rl": True} if t in rl else provenance))
    for fact in facts if eval_phrasings else ():
        held = fact.get(HELD_OUT, [])
        for t in pick_templates(seed, fact["id"], len(held), eval_phrasings, stream=":held_out") if held else ():
            out.append(_fact_record(family, fact, held[t], system, extra,
                                    {"source": source, "fact_id": fact["id"], "template": t, "held_out": True}))
    return out


def _fact_record(family: str, fact: dict[str, Any], question: str, system: str,
                 extra: Callable[[dict[str, Any]], dict[str, Any]], provenance: dict[str, Any]) -> Record:
    return Record(family=family, prompt=messages(system, question), completion=assistant(fact["answer"]),
                  answer=fact["answer"], metadata={"topic": fact["topic"], "fact_id": fact["id"], **extra(fact)},
                  provenance=provenance)
