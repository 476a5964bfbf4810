"""Tests of the facts-table rules shared by the MLPerf and PLP tables: a row scoped to a round or suite names it in
every question template, held-out templates are never trained wordings, and the packaged tables follow the rules.

Run: pytest tests/data/qa/test_tables.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.data.qa.mlperf import MLPERF_TOPICS, load_mlperf_facts
from hpcrl_core.data.qa.plp import load_plp_facts
from hpcrl_core.data.qa.tables import fact_records, read_facts_table
from hpcrl_core.data.schema import Record
from hpcrl_core.errors import ConfigError, DataError

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


def test_held_out_templates_are_checked_like_trained_ones(tmp_path: Path) -> None:
    held = ["Name BERT's quality target in MLPerf Training v0.7.", "BERT in MLPerf Training v0.7 had to reach what?"]
    assert _read(tmp_path, _row(round="v0.7", held_out_templates=held))[0]["held_out_templates"] == held
    other = _row(id="mlperf-y", question_templates=["Which dataset does BERT use in MLPerf Training?"],
                 held_out_templates=["What was BERT's quality target in MLPerf Training v0.7?"])
    table = tmp_path / "two.json"
    table.write_text(json.dumps([_row(), other]))
    with pytest.raises(DataError, match=r"row 1 \(id 'mlperf-y'\): field 'held_out_templates' repeats the question "
                                        r"\"What was BERT's quality target in MLPerf Training v0\.7\?\" of row 0"):
        read_facts_table(table, MLPERF_TOPICS, LISTS)  # a held-out wording trained elsewhere would not be held out
    with pytest.raises(DataError, match="list the same question twice"):
        _read(tmp_path, _row(held_out_templates=["what was BERT's quality target in MLPerf Training v0.7?"]))
    with pytest.raises(DataError, match=r"the question template 'Name the BERT target\.' does not name it"):
        _read(tmp_path, _row(round="v0.7", held_out_templates=["Name the BERT target."]))
    with pytest.raises(DataError, match="field 'held_out_templates' is missing or not a list"):
        _read(tmp_path, _row(held_out_templates="Name the BERT target."))


def test_eval_phrasings_add_marked_held_out_records_after_the_trained_ones() -> None:
    def records(eval_phrasings: int) -> list[Record]:
        return fact_records("mlperf", FACTS, 1234, 3, "sys", "synthetic:test", lambda f: {}, eval_phrasings)

    trained, one, two = records(0), records(1), records(2)
    assert one[:len(trained)] == trained and two[:len(trained)] == trained
    assert len(one) - len(trained) == len(FACTS) and len(two) - len(trained) == 2 * len(FACTS)
    by_id = {f["id"]: f for f in FACTS}
    for r in two[len(trained):]:
        assert r.provenance["held_out"] is True
        assert r.question == by_id[r.metadata["fact_id"]]["held_out_templates"][r.provenance["template"]]
    assert not any("held_out" in r.provenance for r in trained)
    with pytest.raises(ConfigError, match="eval_phrasings must be 0 or more; received -1"):
        records(-1)


def test_every_packaged_fact_has_two_held_out_wordings_that_ask_the_same_thing() -> None:
    for table in (FACTS, load_plp_facts()):
        for fact in table:
            held = fact["held_out_templates"]
            assert len(held) >= 2, fact["id"]
            assert all(q.rstrip().endswith(("?", ".")) for q in held), fact["id"]
