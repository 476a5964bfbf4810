"""Tests of the prepare stage's core: cards, atomic writing, source checks, quarantine of broken file records, and
held-out sets of the default data at least as large as HARGO's.

Run: pytest tests/data/test_prepare.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.config import PrepareParams, parse_params
from hpcrl_core.data import prepare as prep
from hpcrl_core.data.cards import card_markdown
from hpcrl_core.data.schema import Record, assistant, messages, read_jsonl
from hpcrl_core.errors import ConfigError, DataError


def _items(n: int) -> list[Record]:
    return [Record("plp", messages(None, f"What is dataset {i}?"), assistant(f"Dataset {i} is a corpus."),
                   f"Dataset {i} is a corpus.", {"topic": "dataset" if i % 2 else "task", "fact_id": str(i),
                                                  "keywords": []}, {"source": "synthetic:test"}) for i in range(n)]


def _out(family: str = "plp", n: int = 40) -> prep.FamilyOutput:
    return prep.finish(family, _items(n), parse_params({}).prepare, key=lambda r: r.metadata["topic"])


def test_finish_builds_split_and_card() -> None:
    o = _out()
    card = o.card
    assert card["counts"] == {"train": 36, "eval": 4, "rl": 0, "total": 40}  # 2 of each 20-item topic
    assert card["label_balance"]["eval"] and card["hygiene"]["train_eval_overlap"] == 0
    assert card["lengths"]["prompt_words"]["max"] >= card["lengths"]["prompt_words"]["min"] > 0
    md = card_markdown(card)
    assert "# Data card: plp" in md and "| dataset |" in md


def test_write_outputs_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "data"
    prep.write_outputs([_out()], out)
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    assert (out / "plp" / "card.json").exists() and len(list(read_jsonl(out / "plp" / "train.jsonl"))) == 36

    def boom(*a: object, **k: object) -> None:
        raise DataError("disk full (simulated)")

    monkeypatch.setattr(prep, "write_card", boom)
    with pytest.raises(DataError, match="simulated"):
        prep.write_outputs([_out(n=60)], out)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before  # untouched
    assert len(list(read_jsonl(out / "plp" / "train.jsonl"))) == 36
    assert not list(tmp_path.glob(".data.*"))  # nothing half-written left beside it
    summary = json.loads((out / "summary.json").read_text())
    assert summary["families"]["plp"]["train"] == 36


def test_sources_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="dataracebench"):
        parse_params({"prepare": {"sources": {"mlperf": ["dataracebench:/x"]}}})
    with pytest.raises(ConfigError, match="unknown family 'dgemm'"):
        parse_params({"prepare": {"sources": {"dgemm": ["synthetic"]}}})
    with pytest.raises(ConfigError, match="takes no path"):
        parse_params({"prepare": {"sources": {"plp": ["synthetic:/x"]}}})
    p = parse_params({"prepare": {"sources": {"plp": [f"hpcgpt:{tmp_path}/task1_plp.json"]}}}).prepare
    with pytest.raises(DataError, match="task1_plp.json does not exist"):
        prep.sources_of(p, "plp")
    assert prep.sources_of(p, "mlperf") == [("synthetic", None)]  # unlisted family: synthetic


def test_empty_family_is_an_error() -> None:
    with pytest.raises(DataError, match="produced no items"):
        prep.finish("plp", [], parse_params({}).prepare, key=str)


def test_bad_hpcgpt_source_stops_the_family_with_file_record_and_field(tmp_path: Path) -> None:
    from hpcrl_core.data.families import prepare_qa

    bad = tmp_path / "task1_plp.json"
    bad.write_text('[{"instruction": "What is POJ-104?", "input": ""}]')
    p = parse_params({"prepare": {"sources": {"plp": [f"hpcgpt:{bad}"]}}}).prepare
    with pytest.raises(DataError) as err:
        prepare_qa("plp", p)
    assert str(bad) in str(err.value) and "record 0" in str(err.value) and "'output'" in str(err.value)


def test_real_and_synthetic_sources_combine(tmp_path: Path) -> None:
    from hpcrl_core.data.families import prepare_qa

    real = tmp_path / "task1_ml_perf.json"
    real.write_text(json.dumps([{"instruction": "Which MLPerf suite measures inference?", "input": "",
                                 "output": "MLPerf Inference"}] * 3))
    p = parse_params({"prepare": {"sources": {"mlperf": ["synthetic", f"hpcgpt:{real}"]}}}).prepare
    out = prepare_qa("mlperf", p)
    sources = out.card["sources"]
    assert sources[f"hpcgpt:{real}"] == 1  # three identical records: two duplicates dropped
    assert out.card["hygiene"]["duplicates_dropped"] == 2
    assert sources["synthetic:mlperf-facts@1"] > 100


def test_dataracebench_notice_is_written_next_to_the_race_data(tmp_path: Path) -> None:
    from hpcrl_core.data.families import prepare_race

    drb = Path(__file__).parent / "race" / "fixtures" / "dataracebench"
    p = parse_params({"prepare": {"sources": {"race_c": ["synthetic", f"dataracebench:{drb}"]},
                                  "race": {"per_pattern": 2, "tsan": False}}}).prepare
    out = prepare_race("c", p)
    assert out.card["sources"][f"dataracebench:{drb}"] == 2
    prep.write_outputs([out], tmp_path / "data")
    notice = (tmp_path / "data" / "race_c" / "NOTICE-DataRaceBench.txt").read_text()
    assert "Stand-in notice: Copyright (c) hpcrl test authors." in notice
    card = json.loads((tmp_path / "data" / "race_c" / "card.json").read_text())
    assert "NOTICE-DataRaceBench.txt" in card["notices"]
    assert "NOTICE-DataRaceBench.txt" in (tmp_path / "data" / "race_c" / "card.md").read_text()
    synthetic_only = prepare_race("c", parse_params({"prepare": {"race": {"per_pattern": 2, "tsan": False}}}).prepare)
    assert not synthetic_only.text_files and "notices" not in synthetic_only.card


RACE_FIXTURES = Path(__file__).parent / "race" / "fixtures"


def _published_like(tmp_path: Path, good: int) -> Path:
    """A file in HPC-GPT's task2_c_c++.json layout: ``good`` distinct labelled records, then the stray one."""
    rows = json.loads((RACE_FIXTURES / "hpcgpt_task2_c_sample.json").read_text())
    labelled, stray = [rows[0], rows[1], rows[4], rows[5]], rows[2]
    out = [{**labelled[k % 4], "instruction": labelled[k % 4]["instruction"].replace("100", str(200 + k))}
           for k in range(good)]
    path = tmp_path / "task2_c_c++.json"
    path.write_text(json.dumps(out[:good // 2] + [stray] + out[good // 2:], indent=4))
    return path


def test_one_unlabellable_record_is_quarantined_and_listed_in_the_card(tmp_path: Path) -> None:
    from hpcrl_core.data.families import prepare_race

    src = _published_like(tmp_path, 150)  # 1 of 151 broken: under the default 1%
    p = parse_params({"prepare": {"sources": {"race_c": [f"hpcgpt:{src}"]}, "race": {"tsan": False}}}).prepare
    out = prepare_race("c", p)
    assert out.card["counts"]["total"] == 150
    q = out.card["quarantine"]
    assert q["count"] == 1 and q["max_share"] == 0.01
    assert q["sources"] == {f"hpcgpt:{src}": {"records": 151, "kept": 150, "quarantined": 1}}
    assert q["records"] == [{"source": f"hpcgpt:{src}", "record": 75,
                             "reason": "field 'output': cannot read a yes/no race label from "
                                       "\"' marker are used for each code snippet.\\n\\n1.\""}]
    prep.write_outputs([out], tmp_path / "data")
    md = (tmp_path / "data" / "race_c" / "card.md").read_text()
    assert "## Quarantine" in md and f"| hpcgpt:{src} | 75 | field 'output': cannot read" in md
    assert json.loads((tmp_path / "data" / "race_c" / "card.json").read_text())["quarantine"]["count"] == 1


def test_too_many_broken_records_stop_the_family_naming_count_threshold_and_reasons() -> None:
    from hpcrl_core.data.families import prepare_race

    broken = RACE_FIXTURES / "hpcgpt_task2_fortran_broken.json"  # 2 of its 4 records cannot be labelled
    p = parse_params({"prepare": {"sources": {"race_fortran": [f"hpcgpt:{broken}"]}}}).prepare
    with pytest.raises(DataError) as err:
        prepare_race("fortran", p)
    msg = str(err.value)
    assert f"hpcgpt:{broken}: 2 of 4 records (50.0%) cannot be read or labelled" in msg
    assert "prepare.max_quarantine_share = 0.01" in msg
    assert "record 1: field 'output' is missing" in msg and "record 2: field 'output': cannot read" in msg
    lenient = parse_params({"prepare": {"sources": {"race_fortran": [f"hpcgpt:{broken}"]},
                                        "max_quarantine_share": 0.5}}).prepare
    assert prepare_race("fortran", lenient).card["quarantine"]["count"] == 2


def test_synthetic_only_cards_have_no_quarantine_section_and_the_share_is_validated(tmp_path: Path) -> None:
    from hpcrl_core.data.families import prepare_qa

    assert "quarantine" not in prepare_qa("plp", parse_params({}).prepare).card
    real = tmp_path / "task1_plp.json"
    real.write_text(json.dumps([{"instruction": "What is POJ-104?", "input": "", "output": "A C/C++ dataset."}]))
    with_file = parse_params({"prepare": {"sources": {"plp": ["synthetic", f"hpcgpt:{real}"]}}}).prepare
    assert prepare_qa("plp", with_file).card["quarantine"]["count"] == 0  # a clean file: counted, nothing set aside
    with pytest.raises(ConfigError, match="max_quarantine_share"):
        parse_params({"prepare": {"max_quarantine_share": 1.5}})


HARGO_EVAL_SIZES = {"race_c": 185, "race_fortran": 157, "mlperf": 182, "plp": 60}  # the paper's held-out sets


def _families(p: PrepareParams) -> dict[str, prep.FamilyOutput]:
    from hpcrl_core.data.families import prepare_qa, prepare_race

    return {"race_c": prepare_race("c", p), "race_fortran": prepare_race("fortran", p),
            "mlperf": prepare_qa("mlperf", p), "plp": prepare_qa("plp", p)}


def test_default_held_out_sets_are_at_least_hargos_and_train_is_as_without_them() -> None:
    p = parse_params({"prepare": {"race": {"tsan": False}}}).prepare  # TSan adds verdicts, never items
    without = parse_params({"prepare": {"race": {"tsan": False, "eval_pairs": 0}, "mlperf": {"eval_phrasings": 0},
                                        "plp": {"eval_phrasings": 0}}}).prepare
    outs, bases = _families(p), _families(without)
    for family, out in outs.items():
        train, evals = out.files["train.jsonl"], out.files["eval.jsonl"]
        assert len(evals) >= HARGO_EVAL_SIZES[family], f"{family}: {len(evals)} eval items"
        assert not {r.question for r in train} & {r.question for r in evals}, f"{family}: eval question in train"
        assert not any(prep.is_held_out(r) for r in train)
        assert train == bases[family].files["train.jsonl"], f"{family}: held-out items changed train"
        assert bases[family].files["eval.jsonl"] == [r for r in evals if not prep.is_held_out(r)]
    for family in ("mlperf", "plp"):  # every trained fact is asked in words it was never trained on
        evals = outs[family].files["eval.jsonl"]
        trained = {r.metadata["fact_id"] for r in outs[family].files["train.jsonl"]}
        held = [r for r in evals if prep.is_held_out(r)]
        assert {r.metadata["fact_id"] for r in held} == trained | {r.metadata["fact_id"] for r in evals}


def test_held_out_phrasings_are_not_used_when_facts_are_held_out() -> None:
    from hpcrl_core.data.families import prepare_qa

    p = parse_params({"prepare": {"plp": {"hold_out": "fact"}}}).prepare
    out = prepare_qa("plp", p)
    assert not any(prep.is_held_out(r) for split in out.files.values() for r in split)
    assert out.card["extra"] == {"hold_out": "fact", "eval_phrasings": 0, "rl_phrasings": 0}
    assert out.files["rl.jsonl"] == []  # an RL wording of a fact eval holds out would teach RL that fact
