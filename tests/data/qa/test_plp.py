"""Tests of the PLP facts table, its generated items and the HPC-GPT loader.

Run: ``.venv/bin/python -m pytest tests/data/qa/test_plp.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.data.qa.plp import PLP_FACTS, PLP_TOPICS, SYSTEM, generate_plp_items, load_hpcgpt_plp, load_plp_facts
from hpcrl_core.errors import ConfigError, DataError

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = FIXTURES / "plp_facts_small.json"
FACTS = load_plp_facts()


def test_packaged_table_validates_covers_every_topic_and_cites_sources() -> None:
    assert 40 <= len(FACTS) <= 70
    assert {f["topic"] for f in FACTS} == set(PLP_TOPICS)
    assert all(len(f["source"]) > 20 and any(c.isdigit() for c in f["source"]) for f in FACTS), \
        "every row cites a paper or page with its year"


def test_ids_are_unique_and_prefixed() -> None:
    ids = [f["id"] for f in FACTS]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("plp-") for i in ids)


def test_questions_are_distinct_paraphrases() -> None:
    everywhere = [q.lower() for f in FACTS for q in f["question_templates"]]
    assert len(set(everywhere)) == len(everywhere)
    # six or more trained wordings per fact: with two, a small model memorises them and fails held-out ones
    too_few = [f["id"] for f in FACTS if not 6 <= len(f["question_templates"]) <= 10]
    assert not too_few, too_few


@pytest.mark.parametrize("fact", FACTS, ids=[f["id"] for f in FACTS])
def test_answers_are_descriptive_and_mention_their_keywords(fact: dict[str, Any]) -> None:
    answer = fact["answer"]
    assert answer.endswith(".") and 60 <= len(answer) <= 420, "one or two descriptive sentences"
    missing = [k for k in fact["keywords"] if k.lower() not in answer.lower()]
    assert not missing, f"keywords absent from the answer: {missing}"


def test_generated_items_carry_the_schema() -> None:
    items = generate_plp_items(seed=11, paraphrases=2)
    assert len(items) == sum(min(2, len(f["question_templates"])) for f in FACTS)
    assert len({r.id for r in items}) == len(items)
    by_id = {f["id"]: f for f in FACTS}
    for r in items:
        fact = by_id[r.metadata["fact_id"]]
        assert r.family == "plp"
        assert r.metadata == {"topic": fact["topic"], "fact_id": fact["id"], "keywords": fact["keywords"]}
        assert r.provenance == {"source": "synthetic:plp-facts@1", "fact_id": fact["id"],
                                "template": r.provenance["template"]}
        assert r.prompt[0] == {"role": "system", "content": SYSTEM}
        assert r.question == fact["question_templates"][r.provenance["template"]]
        assert r.answer == r.response == fact["answer"]


def test_generation_is_deterministic_and_the_seed_picks_templates() -> None:
    first = [r.to_json() for r in generate_plp_items(5, 1)]
    assert first == [r.to_json() for r in generate_plp_items(5, 1)]
    assert first != [r.to_json() for r in generate_plp_items(6, 1)]


def test_paraphrases_caps_templates_per_fact_and_must_be_positive() -> None:
    fact_ids = [r.metadata["fact_id"] for r in generate_plp_items(0, 2, path=SMALL)]
    assert fact_ids == ["plp-small-three", "plp-small-three", "plp-small-one"]
    assert len(generate_plp_items(0, 9, path=SMALL)) == 4
    with pytest.raises(ConfigError, match="received -1"):
        generate_plp_items(0, -1, path=SMALL)


def test_hpcgpt_loader_reads_alpaca_records() -> None:
    recs = load_hpcgpt_plp(FIXTURES / "task1_plp.json")
    assert len(recs) == 2
    assert recs[0].answer.startswith("CodeSearchNet is a corpus")
    assert recs[1].question == "Explain the following code dataset.\n\nPOJ-104"
    for i, r in enumerate(recs):
        assert r.family == "plp" and r.prompt[0]["content"] == SYSTEM
        assert r.metadata == {"topic": None, "fact_id": None, "keywords": []}
        assert r.provenance == {"source": f"hpcgpt:{FIXTURES / 'task1_plp.json'}", "record": i}


def test_hpcgpt_loader_errors_name_file_record_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "task1_plp.json"
    bad.write_text(json.dumps([{"instruction": "Q?", "output": "A."}, {"input": "x", "output": "B."}]))
    with pytest.raises(DataError, match=r"task1_plp\.json: record 1: field 'instruction'"):
        load_hpcgpt_plp(bad)
    bad.write_text("[{")
    with pytest.raises(DataError, match=r"task1_plp\.json: not valid JSON"):
        load_hpcgpt_plp(bad)
    with pytest.raises(DataError, match="absent.json: no such file"):
        load_hpcgpt_plp(tmp_path / "absent.json")


@pytest.mark.parametrize(("change", "message"), [
    ({"source": None}, r"row 2 \(id '[\w-]+'\): field 'source' is missing"),
    ({"keywords": []}, r"row 2 .*field 'keywords' is empty"),
    ({"keywords": None}, r"row 2 .*field 'keywords' is missing or not a list"),
    ({"topic": "benchmark"}, r"row 2 .*field 'topic' is 'benchmark'; allowed: dataset, task, metric"),
    ({"answer": ""}, r"row 2 .*field 'answer' is missing or not a non-empty string"),
    ({"aliases": ["x"]}, r"row 2 .*unknown field\(s\) \['aliases'\]"),
])
def test_bad_facts_rows_name_file_row_and_field(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    rows = json.loads(PLP_FACTS.read_text())
    for key, value in change.items():
        if value is None:
            del rows[2][key]
        else:
            rows[2][key] = value
    table = tmp_path / "plp.json"
    table.write_text(json.dumps(rows))
    with pytest.raises(DataError, match=r"plp\.json: " + message):
        load_plp_facts(table)


def test_bad_facts_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="absent.json: no such facts table"):
        load_plp_facts(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": "plp-x",')
    with pytest.raises(DataError, match=r"broken\.json: not valid JSON at line 1"):
        load_plp_facts(broken)
