"""The RL split: prompts for RL that SFT never trains on and evaluation never asks (``data/<family>/rl.jsonl``)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.data import prepare as prep
from hpcrl_core.data.families import prepare_qa, prepare_race
from hpcrl_core.data.hygiene import split_rl
from hpcrl_core.data.qa.tables import fact_records
from hpcrl_core.data.race.generator import PATTERNS, generate_race_items
from hpcrl_core.data.schema import Record, assistant, messages, read_jsonl
from hpcrl_core.errors import ConfigError, DataError

FACTS = [{"id": f"f{i}", "topic": "training", "answer": f"answer {i}", "source": "test",
          "question_templates": [f"Question {i} wording {t}?" for t in range(6)],
          "held_out_templates": [f"Held {i} wording {t}?" for t in range(2)]} for i in range(5)]


def _questions(records: list[Record]) -> set[str]:
    return {" ".join(r.question.lower().split()) for r in records}


def test_rl_phrasings_move_one_chosen_wording_per_fact_out_of_training() -> None:
    plain = fact_records("plp", FACTS, 7, 6, "sys", "synthetic:test", lambda f: {}, eval_phrasings=2)
    moved = fact_records("plp", FACTS, 7, 6, "sys", "synthetic:test", lambda f: {}, eval_phrasings=2, rl_phrasings=2)
    assert [r.question for r in moved] == [r.question for r in plain]  # the same records, some marked
    rl = [r for r in moved if prep.is_rl(r)]
    assert Counter(r.metadata["fact_id"] for r in rl) == {f["id"]: 2 for f in FACTS}
    assert not any(prep.is_held_out(r) for r in rl)  # RL wordings come from the trained templates
    assert len({tuple(sorted(r.provenance["template"] for r in rl if r.metadata["fact_id"] == f["id"]))
                for f in FACTS}) > 1  # a seeded pick per fact, not the same templates everywhere
    one = [{**FACTS[0], "question_templates": ["Only wording?"]}]
    assert not any(prep.is_rl(r) for r in fact_records("plp", one, 7, 6, "s", "t", lambda f: {}, rl_phrasings=1))


def test_prepared_rl_prompts_are_asked_neither_by_sft_nor_by_eval() -> None:
    p = parse_params({"prepare": {"race": {"tsan": False, "per_pattern": 6, "eval_pairs": 2, "rl_pairs": 3}}}).prepare
    outs = [prepare_race("c", p), prepare_race("fortran", p), prepare_qa("mlperf", p), prepare_qa("plp", p)]
    for out in outs:
        train, evals, rl = (out.files[f"{s}.jsonl"] for s in ("train", "eval", "rl"))
        assert rl and all(prep.is_rl(r) for r in rl) and not any(prep.is_rl(r) for r in train + evals)
        assert not _questions(rl) & _questions(train + evals), out.family
        assert out.card["counts"]["rl"] == len(rl) == out.card["hygiene"]["rl"]
        assert out.card["hygiene"]["rl_dropped_asked_elsewhere"] == 0
    race_rl = outs[0].files["rl.jsonl"]
    assert Counter((r.metadata["pattern"], r.answer) for r in race_rl) == {(q, a): 3 for q in PATTERNS
                                                                           for a in ("yes", "no")}
    for out in outs[2:]:  # every fact keeps trained wordings and gives RL exactly one other
        rl_facts = Counter(r.metadata["fact_id"] for r in out.files["rl.jsonl"])
        assert set(rl_facts.values()) == {1}
        assert set(rl_facts) <= {r.metadata["fact_id"] for r in out.files["train.jsonl"]}


def test_rl_items_leave_the_eval_split_exactly_as_without_them() -> None:
    def outputs(rl: int) -> list[prep.FamilyOutput]:
        p = parse_params({"prepare": {"race": {"tsan": False, "per_pattern": 6, "eval_pairs": 2, "rl_pairs": rl},
                                      "mlperf": {"rl_phrasings": min(rl, 1)}}}).prepare
        return [prepare_race("c", p), prepare_qa("mlperf", p)]

    (race, mlperf), (race0, mlperf0) = outputs(3), outputs(0)
    assert race.files["train.jsonl"] == race0.files["train.jsonl"]  # RL pairs come after, and take no part in the draw
    assert race.files["eval.jsonl"] == race0.files["eval.jsonl"]
    assert race0.files["rl.jsonl"] == [] and mlperf0.files["rl.jsonl"] == []
    held = [r for r in mlperf.files["eval.jsonl"] if prep.is_held_out(r)]
    assert held == [r for r in mlperf0.files["eval.jsonl"] if prep.is_held_out(r)]
    assert len(mlperf.files["train.jsonl"]) + len(mlperf.files["eval.jsonl"]) + len(mlperf.files["rl.jsonl"]) == \
        len(mlperf0.files["train.jsonl"]) + len(mlperf0.files["eval.jsonl"])


def test_rl_fraction_draws_whole_groups_per_stratum_and_keeps_conflicts_in_train() -> None:
    def item(i: int, label: str, group: int) -> Record:
        return Record("race_c", messages(None, f"Program {i}"), assistant(label), label,
                      metadata={"label": label, "g": group})

    train = [item(i, "yes" if (i // 2) % 2 else "no", i // 2) for i in range(40)]  # 10 groups of two per label
    evals = [item(100 + i, "no", 100 + i) for i in range(4)]
    keep = {train[0].id}
    dup = Record("race_c", messages(None, "Program 3"), assistant("yes"), "yes", provenance={"rl": True})
    fresh = Record("race_c", messages(None, "Program 999"), assistant("no"), "no", provenance={"rl": True})
    rest, rl, dropped = split_rl(train, evals, [dup, fresh, fresh], lambda r: r.answer, 0.3, 3,
                                 group=lambda r: str(r.metadata["g"]), keep_in_train=keep)
    assert all(prep.is_rl(r) for r in rl)
    moved = [r for r in rl if r.question != "Program 999"]
    assert Counter(r.answer for r in moved) == {"yes": 2 * 3, "no": 2 * 3}  # round(10 * 0.3), round(9 * 0.3) groups
    assert {r.metadata["g"] for r in moved}.isdisjoint({r.metadata["g"] for r in rest})  # groups stay whole
    assert train[0] in rest and [r.question for r in rl if "g" not in r.metadata] == ["Program 999"]
    assert dropped == 2  # the generated item that train (or a moved item) asks, and fresh's repeat
    again = split_rl(train, evals, [], lambda r: r.answer, 0.3, 3, group=lambda r: str(r.metadata["g"]),
                     keep_in_train=keep)
    assert again[1] == moved  # fixed by the seed and the groups


def test_written_data_has_an_rl_file_per_family_and_its_card_counts_it(tmp_path: Path) -> None:
    p = parse_params({"prepare": {"race": {"tsan": False, "per_pattern": 2, "eval_pairs": 1, "rl_pairs": 1}}}).prepare
    summary = prep.write_outputs([prepare_race("c", p), prepare_qa("plp", p)], tmp_path / "data")
    for family in ("race_c", "plp"):
        rl = list(read_jsonl(tmp_path / "data" / family / "rl.jsonl"))
        assert rl and summary["families"][family]["rl"] == len(rl)
        card = json.loads((tmp_path / "data" / family / "card.json").read_text())
        assert card["counts"]["total"] == card["counts"]["train"] + card["counts"]["eval"] + len(rl)
        assert f"RL only {len(rl)}" in (tmp_path / "data" / family / "card.md").read_text()


def test_bad_rl_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="prepare.plp.rl_phrasings"):
        parse_params({"prepare": {"plp": {"rl_phrasings": -1}}})
    with pytest.raises(ConfigError, match="rl_fraction"):
        parse_params({"prepare": {"rl_fraction": 1.0}})
    with pytest.raises(DataError, match="rl_pairs=-1"):
        generate_race_items("c", 2, seed=1, rl_pairs=-1)
    only_rl = [Record("plp", messages(None, "Q?"), assistant("A."), "A.", provenance={"rl": True})]
    with pytest.raises(DataError, match="every item is marked for RL only"):
        prep.finish("plp", only_rl, parse_params({}).prepare, key=lambda r: "x")


def test_file_sources_get_an_rl_share_and_a_raw_split_that_counts_twins(tmp_path: Path) -> None:
    """HPC-GPT's Alpaca format with what the published files hold: exact duplicates and conflicting answers."""
    rows = [{"instruction": f"What does dataset {i} hold?", "input": "", "output": f"Corpus number {i}."}
            for i in range(60)]
    rows += [dict(rows[i]) for i in range(10)]  # exact duplicates
    rows += [{**rows[i], "output": f"Another answer {i}."} for i in range(10, 20)]  # conflicting answers
    src = tmp_path / "task1_plp.json"
    src.write_text(json.dumps(rows))
    sources = {"plp": [f"hpcgpt:{src}"]}
    cleaned = prepare_qa("plp", parse_params({"prepare": {"sources": sources, "rl_fraction": 0.2}}).prepare)
    hygiene = cleaned.card["hygiene"]
    assert hygiene["duplicates_dropped"] == 10 and hygiene["conflicting_items"] == 20
    assert hygiene["eval_exact_twins_in_train"] == hygiene["eval_conflicting_twins_in_train"] == 0
    train, evals, rl = (cleaned.files[f"{s}.jsonl"] for s in ("train", "eval", "rl"))
    assert rl and all(prep.is_rl(r) for r in rl) and len(train) + len(evals) + len(rl) == 70
    conflicting = {r.question for r in train + evals + rl if r.question in {q["instruction"] for q in rows[10:20]}}
    assert conflicting and not conflicting & _questions(rl + evals)  # conflicts stay in train
    raw = prepare_qa("plp", parse_params({"prepare": {"sources": sources, "split": "raw"}}).prepare)
    h = raw.card["hygiene"]
    assert h["split"] == "raw" and h["duplicates_dropped"] == 0 and h["train"] + h["eval"] == 80
    assert h["eval_exact_twins_in_train"] + h["eval_conflicting_twins_in_train"] > 0
    with pytest.raises(ConfigError, match="prepare.split"):
        parse_params({"prepare": {"split": "paper"}})
