"""Tests of the facts-table rules shared by the MLPerf and PLP tables: a row scoped to a round or suite names it in
every question template, and the packaged MLPerf table follows the rule.

Run: pytest tests/data/qa/test_tables.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.data.qa.mlperf import MLPERF_TOPICS, load_mlperf_facts
from hpcrl_core.data.qa.tables import read_facts_table
from hpcrl_core.errors import DataError

FACTS = load_mlperf_facts()
ROUND_IN_TEXT = re.compile(r"(?<![\w.])v\d+\.\d+")
LISTS = {"aliases": False, "partial": False}


def _row(**change: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"id": "mlperf-x", "topic": "training", "answer": "0.712 masked LM accuracy",
                           "aliases": [], "partial": [], "source": "MLPerf Training v0.7 benchmark table",
                           "question_templates": ["What was BERT's quality target in MLPerf Training v0.7?",
                                                  "Which masked-LM accuracy did BERT need in MLPerf Training v0.7?"]}
    row.update(change)
    return row


def _read(tmp_path: Path, row: dict[str, Any]) -> list[dict[str, Any]]:
    table = tmp_path / "facts.json"
    table.write_text(json.dumps([row]))
    return read_facts_table(table, MLPERF_TOPICS, LISTS)


def test_a_round_named_in_every_template_is_accepted(tmp_path: Path) -> None:
    assert _read(tmp_path, _row(round="v0.7"))[0]["round"] == "v0.7"
    suite = _row(suite="datacenter", question_templates=["Which scenarios must a datacenter BERT submission run?",
                                                        "Which scenarios does BERT need in the Datacenter suite?"])
    assert _read(tmp_path, suite)[0]["suite"] == "datacenter"  # case does not matter


@pytest.mark.parametrize(("change", "message"), [
    ({"round": "v1.0"}, r"field 'round' is 'v1.0', but the question template \"What was BERT's quality target in "
                        r"MLPerf Training v0.7\?\" does not name it"),
    ({"round": "v0.7", "question_templates": ["What was BERT's quality target in MLPerf Training v0.7?",
                                              "What masked-LM accuracy must BERT reach in MLPerf Training?"]},
     r"field 'round' is 'v0.7', but the question template 'What masked-LM accuracy must BERT reach in MLPerf "
     r"Training\?' does not name it"),
    ({"round": "v0.7", "question_templates": ["What was BERT's quality target in MLPerf Training v0.75?"]},
     r"field 'round' is 'v0.7', but .*v0\.75\?\" does not name it"),  # v0.75 is not v0.7
    ({"round": "0.7"}, r"field 'round' is '0.7'; give the round as MLCommons names it, e.g. 'v0.7'"),
    ({"round": ""}, r"field 'round' must be a non-empty string \(received ''\)"),
    ({"suite": "edge"}, r"field 'suite' is 'edge', but the question template"),
    ({"rund": "v0.7"}, r"unknown field\(s\) \['rund'\]"),
])
def test_a_scoped_row_whose_template_omits_the_scope_is_refused(tmp_path: Path, change: dict[str, Any],
                                                                 message: str) -> None:
    with pytest.raises(DataError, match=r"facts\.json: row 0 \(id 'mlperf-x'\): " + message):
        _read(tmp_path, _row(**change))


def test_packaged_rows_that_ask_about_one_round_declare_it() -> None:
    undeclared = []
    for fact in FACTS:
        named = set.intersection(*(set(ROUND_IN_TEXT.findall(q)) for q in fact["question_templates"]))
        if named and fact.get("round") not in named:
            undeclared.append(f"{fact['id']}: every question names {sorted(named)}")
    assert not undeclared, "add the round field (the loader then checks every template names it):\n" + \
        "\n".join(undeclared)


def test_packaged_table_scopes_the_round_and_suite_dependent_facts() -> None:
    by_id = {f["id"]: f for f in FACTS}
    assert by_id["mlperf-hpc-openfold"]["round"] == "v3.0"  # OpenFold joined MLPerf HPC in v3.0, not v2.0
    assert by_id["mlperf-hpc-v20-benchmarks"]["answer"] == "CosmoFlow, DeepCAM and OpenCatalyst"
    assert (by_id["mlperf-train-bert-target-v07"]["round"], by_id["mlperf-train-bert-target-v07"]["answer"]) == \
        ("v0.7", "0.712 masked LM accuracy")
    assert (by_id["mlperf-train-bert-target"]["round"], by_id["mlperf-train-bert-target"]["answer"]) == \
        ("v1.0", "0.720 masked LM accuracy")
    assert by_id["mlperf-inf-bert-accuracy-levels"]["suite"] == "datacenter"
    assert by_id["mlperf-inf-bert-edge-accuracy"]["answer"] == "99% of FP32 accuracy"
    assert by_id["mlperf-inf-bert-datacenter-scenarios"]["suite"] == "datacenter"
    assert "mlperf-inf-datacenter-scenarios" not in by_id  # scenarios differ per benchmark: asked per benchmark now
