"""Tests of the MLPerf facts table, its generated items, the HPC-GPT loader and the tiered score.

Run: ``.venv/bin/python -m pytest tests/data/qa/test_mlperf.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.data.qa.mlperf import (
    MLPERF_FACTS,
    MLPERF_TOPICS,
    SYSTEM,
    generate_mlperf_items,
    load_hpcgpt_mlperf,
    load_mlperf_facts,
)
from hpcrl_core.data.schema import Record, read_jsonl, write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.metrics import exact_match, tiered_score

FIXTURES = Path(__file__).parent / "fixtures"
SMALL = FIXTURES / "mlperf_facts_small.json"
FACTS = load_mlperf_facts()
RESNET = {"answer": "ResNet-50 v1.5", "aliases": ["ResNet-50", "ResNet50 v1.5"], "partial": ["ResNet"]}


def test_packaged_table_validates_covers_every_topic_and_cites_sources() -> None:
    assert 60 <= len(FACTS) <= 120
    assert {f["topic"] for f in FACTS} == set(MLPERF_TOPICS)
    assert all(len(f["source"]) > 20 for f in FACTS), "every row cites a paper or an official page"


def test_ids_are_unique_and_prefixed() -> None:
    ids = [f["id"] for f in FACTS]
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("mlperf-") for i in ids)


def test_questions_are_distinct_paraphrases_and_answers_short() -> None:
    everywhere = [q.lower() for f in FACTS for q in f["question_templates"]]
    assert len(set(everywhere)) == len(everywhere)
    for f in FACTS:
        # six or more trained wordings per fact: with two, a small model memorises them and fails held-out ones
        assert 6 <= len(f["question_templates"]) <= 10, f["id"]
        assert all(q.rstrip().endswith(("?", ".")) for q in f["question_templates"]), f["id"]  # imperatives end in "."
        assert len(f["answer"].split()) <= 8, f"{f['id']}: answers are short facts"


@pytest.mark.parametrize("fact", FACTS, ids=[f["id"] for f in FACTS])
def test_each_row_scores_its_own_answers_consistently(fact: dict[str, Any]) -> None:
    for text in [fact["answer"], *fact["aliases"]]:
        assert tiered_score(text, fact) == 1.0, text
    for text in fact["partial"]:
        assert tiered_score(text, fact) == 0.5, f"partial {text!r} must not also be an exact answer"


def test_generated_items_carry_the_schema() -> None:
    items = generate_mlperf_items(seed=7, paraphrases=2)
    assert len(items) == sum(min(2, len(f["question_templates"])) for f in FACTS)
    assert len({r.id for r in items}) == len(items)
    by_id = {f["id"]: f for f in FACTS}
    for r in items:
        fact = by_id[r.metadata["fact_id"]]
        assert r.family == "mlperf"
        assert set(r.metadata) == {"topic", "fact_id", "aliases", "partial"}
        assert r.metadata == {"topic": fact["topic"], "fact_id": fact["id"], "aliases": fact["aliases"],
                              "partial": fact["partial"]}
        assert r.provenance == {"source": "synthetic:mlperf-facts@1", "fact_id": fact["id"],
                                "template": r.provenance["template"]}
        assert r.prompt[0] == {"role": "system", "content": SYSTEM}
        assert r.question == fact["question_templates"][r.provenance["template"]]
        assert r.answer == r.response == fact["answer"]


def test_generation_is_deterministic_and_the_seed_picks_templates() -> None:
    first = [r.to_json() for r in generate_mlperf_items(3, 1)]
    assert first == [r.to_json() for r in generate_mlperf_items(3, 1)]
    assert first != [r.to_json() for r in generate_mlperf_items(4, 1)]
    assert len(first) == len(FACTS)


def test_paraphrases_caps_templates_per_fact_and_must_be_positive() -> None:
    items = generate_mlperf_items(0, 3, path=SMALL)
    per_fact = [r.metadata["fact_id"] for r in items]
    assert per_fact.count("mlperf-small-four") == 3 and per_fact.count("mlperf-small-one") == 1
    assert len(generate_mlperf_items(0, 10, path=SMALL)) == 5
    with pytest.raises(ConfigError, match="received 0"):
        generate_mlperf_items(0, 0, path=SMALL)


def test_items_survive_a_jsonl_round_trip(tmp_path: Path) -> None:
    items = generate_mlperf_items(0, 2, path=SMALL)
    write_jsonl(tmp_path / "train.jsonl", items)
    assert list(read_jsonl(tmp_path / "train.jsonl")) == items


@pytest.mark.parametrize(("prediction", "score"), [
    ("ResNet-50 v1.5", 1.0),
    ("resnet-50 V1.5", 1.0),                        # case
    ("  ResNet 50   v1.5. ", 1.0),                  # whitespace and punctuation
    ("ResNet50 v1.5!", 1.0),                        # an alias
    ("resnet-50", 1.0),                             # another alias
    ("ResNet-500", 0.2),                            # not exact, not contained: "500" is not "50"; shares "resnet"
    ("ResNet-50 v15", 0.5),                         # "v15" is not "v1.5"; alias "ResNet-50" is contained
    ("ResNet-500 v1.5", 0.2),                       # 2 of 3 content tokens of the answer
    ("The reference model is ResNet-50 v1.5.", 0.5),  # contained as a whole phrase
    ("It uses ResNet-50", 0.5),                     # an alias contained
    ("ResNet", 0.5),                                # a partial entry, exactly
    ("a ResNet", 0.2),                              # partial entries count only when exact; half of "ResNet-50"
    ("ResNet-101 v2", 0.2),                         # half the content tokens of alias "ResNet-50"
    ("VGG-16", 0.0),
    ("", 0.0),
    ("...", 0.0),
])
def test_tiered_score_tiers(prediction: str, score: float) -> None:
    assert tiered_score(prediction, RESNET) == score


@pytest.mark.parametrize(("prediction", "reference", "score"), [
    ("0.908", "0.908 mean Dice score", 0.1),         # 1 of 4 content tokens
    ("Server", "SingleStream, MultiStream, Server and Offline", 0.1),
    ("908 mean Dice", "0.908 mean Dice score", 0.2),  # decimal point matters: 0.908 is not 908
    ("7.59% top-1 accuracy", "75.9% top-1 accuracy", 0.2),  # not exact: 7.59 is not 75.9
    ("mean Dice", "0.908 mean Dice score", 0.2),     # exactly half of the content tokens
    ("Dice", "0.908 mean Dice", 0.1),                # a third is below half
    ("0.908 mean dice score", "0.908 mean Dice score", 1.0),
    ("Server and Offline", "Server and Offline", 1.0),
    ("Server", "Server and Offline", 0.2),           # stopword "and" is not content: 1 of 2
    ("the Offline scenario", "Offline", 0.5),
    ("Offline-ish", "Offline", 0.5),                 # "-" separates tokens, so "offline" is a whole token
    ("Offlineish", "Offline", 0.0),                  # not on a word boundary
    ("DeepLabv3", "DeepLabv3+", 0.0),                # "+" is part of the token
    ("DeepLab v3+", "DeepLabv3+", 1.0),
])
def test_tiered_score_word_and_number_boundaries(prediction: str, reference: str, score: float) -> None:
    assert tiered_score(prediction, {"answer": reference}) == score


def test_tiered_score_reads_records_and_reward_columns() -> None:
    record = generate_mlperf_items(0, 1, path=SMALL)[0]
    assert tiered_score("resnet 50", record) == 1.0 and tiered_score("ResNet", record) == 0.5
    columns = {"answer": record.answer, "metadata": record.metadata}  # what a GRPO reward function receives
    assert tiered_score("resnet 50", columns) == 1.0 and tiered_score("ResNet", columns) == 0.5
    with pytest.raises(DataError, match="answer"):
        tiered_score("x", {"metadata": {}})


def test_exact_match() -> None:
    assert exact_match("RESNET-50 v1.5", RESNET)
    assert not exact_match("ResNet-500", RESNET)
    assert not exact_match("It is ResNet-50 v1.5", RESNET)


def test_hpcgpt_loader_reads_alpaca_records() -> None:
    recs = load_hpcgpt_mlperf(FIXTURES / "task1_ml_perf.json")
    assert [r.answer for r in recs] == ["ResNet-50 v1.5", "SQuAD v1.1", "Server and Offline"]
    assert recs[1].question == ("Answer the following question about MLPerf Inference.\n\n"
                                "Which dataset does the BERT benchmark of MLPerf Inference use?")
    for i, r in enumerate(recs):
        assert r.family == "mlperf" and r.prompt[0]["content"] == SYSTEM
        assert r.metadata == {"topic": None, "fact_id": None, "aliases": [], "partial": []}
        assert r.provenance == {"source": f"hpcgpt:{FIXTURES / 'task1_ml_perf.json'}", "record": i}
    assert tiered_score("resnet-50 v1.5", recs[0]) == 1.0


def test_hpcgpt_loader_errors_name_file_record_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "task1_ml_perf.json"
    bad.write_text(json.dumps([{"instruction": "Q?", "output": "A"}, {"instruction": "Q2?", "input": ""}]))
    with pytest.raises(DataError, match=r"task1_ml_perf\.json: record 1: field 'output'"):
        load_hpcgpt_mlperf(bad)
    bad.write_text('[{"instruction": "Q?", "output": "A"},')
    with pytest.raises(DataError, match=r"task1_ml_perf\.json: not valid JSON"):
        load_hpcgpt_mlperf(bad)
    with pytest.raises(DataError, match="absent.json: no such file"):
        load_hpcgpt_mlperf(tmp_path / "absent.json")


def _broken_table(tmp_path: Path, row: int, **change: Any) -> Path:
    rows = json.loads(MLPERF_FACTS.read_text())
    for key, value in change.items():
        if value is None:
            del rows[row][key]
        else:
            rows[row][key] = value
    out = tmp_path / "facts.json"
    out.write_text(json.dumps(rows))
    return out


@pytest.mark.parametrize(("row", "change", "message"), [
    (5, {"source": None}, r"row 5 \(id '[\w-]+'\): field 'source' is missing"),
    (3, {"source": "  "}, r"row 3 \(id '[\w-]+'\): field 'source' is missing or not a non-empty string"),
    (2, {"topic": "trainin"}, r"row 2 .*field 'topic' is 'trainin'; allowed: training"),
    (4, {"id": FACTS[0]["id"]}, r"row 4: field 'id' .* repeats row 0"),
    (1, {"aliases": "ResNet"}, r"row 1 .*field 'aliases' is missing or not a list"),
    (1, {"question_templates": []}, r"row 1 .*field 'question_templates' is empty"),
    (1, {"question_templates": FACTS[0]["question_templates"][:1]}, r"row 1 .*repeats the question .* of row 0"),
    (6, {"answr": "x"}, r"row 6 .*unknown field\(s\) \['answr'\]"),
])
def test_bad_facts_rows_name_file_row_and_field(tmp_path: Path, row: int, change: dict[str, Any],
                                                message: str) -> None:
    with pytest.raises(DataError, match=r"facts\.json: " + message):
        load_mlperf_facts(_broken_table(tmp_path, row, **change))


def test_bad_facts_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="absent.json: no such facts table"):
        load_mlperf_facts(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text(MLPERF_FACTS.read_text()[:-10])
    with pytest.raises(DataError, match=r"broken\.json: not valid JSON at line \d+"):
        load_mlperf_facts(broken)
    broken.write_text('{"id": "x"}')
    with pytest.raises(DataError, match="expected a non-empty JSON array"):
        load_mlperf_facts(broken)


def test_records_validate_family() -> None:
    rec = generate_mlperf_items(0, 1, path=SMALL)[0]
    assert isinstance(rec, Record) and rec.id.startswith("mlperf-")
