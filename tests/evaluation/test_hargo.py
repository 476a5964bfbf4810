"""The HARGO comparison's evaluation: per-item scores, one policy's metrics against SFT, the comparison report, and
greedy answers of a tiny saved model scored end to end.

Hand-computed cases use race and MLPerf rows made by ``score_items`` (no model needed) and PLP rows written out; the
end-to-end test answers with an untrained tiny Qwen2 (hidden 32, 2 layers) and embeds with the bundled MiniLM. CPU,
offline, well under a minute.

Run: ``.venv/bin/python -m pytest tests/evaluation/test_hargo.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.config import Params, parse_params
from hpcrl_core.data.schema import Record, assistant, messages, write_jsonl
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.bootstrap import HEADLINE
from hpcrl_core.evaluation.hargo import (
    answer_items,
    comparison_report,
    evaluate_model,
    load_items,
    method_metrics,
    score_items,
)
from hpcrl_core.evaluation.report import write_report
from hpcrl_core.models.build import load_policy
from hpcrl_core.models.saved import load_saved_policy
from tests.training.test_sft import make_data, make_params

Row = dict[str, Any]
MLPERF_GOLD = {"answer": "ResNet-50 v1.5", "aliases": ["ResNet50"]}


def _race(family: str, gold: str, i: int) -> Record:
    return Record(family=family, prompt=messages(None, f"Does program {i} contain a data race?"),
                  completion=assistant(f"{gold}."), answer=gold, id=f"{family}-{i}")


def _mlperf(i: int) -> Record:
    return Record(family="mlperf", prompt=messages(None, f"Which model is the image classification benchmark? {i}"),
                  completion=assistant(MLPERF_GOLD["answer"]), answer=MLPERF_GOLD["answer"],
                  metadata={"aliases": MLPERF_GOLD["aliases"]}, id=f"mlperf-{i}")


def _plp(i: int, prediction: str, score: float) -> Row:
    """A PLP row as score_items writes it, with a given cosine (embedding is tested end to end below)."""
    return {"family": "plp", "id": f"plp-{i}", "prediction": prediction, "gold": "OpenMP splits loops.",
            "score": score, "length": len(prediction), "degenerate": False}


def _rows(race_c: list[tuple[str, str]], race_fortran: list[tuple[str, str]], mlperf: list[str],
          plp: list[tuple[str, float]]) -> list[Row]:
    """Rows of one model: (gold, answer) per race item, answers to the MLPerf items, (answer, cosine) per PLP item."""
    records = [_race("race_c", g, i) for i, (g, _) in enumerate(race_c)]
    records += [_race("race_fortran", g, i) for i, (g, _) in enumerate(race_fortran)]
    records += [_mlperf(i) for i in range(len(mlperf))]
    answers = [a for _, a in race_c] + [a for _, a in race_fortran] + mlperf
    return score_items(records, answers) + [_plp(i, p, s) for i, (p, s) in enumerate(plp)]


def _params(**evaluate_hargo: Any) -> Params:
    return parse_params({"evaluate_hargo": {"bootstrap_resamples": 500, **evaluate_hargo}})


# --- per-item scores ---------------------------------------------------------------------------------------------

def test_score_items_scores_each_family_by_its_task_score() -> None:
    rows = _rows([("yes", "Yes, two threads write a[0]."), ("no", "I cannot tell.")], [("no", "no")],
                 ["resnet 50 v1.5.", "It is ResNet-50 v1.5 in the closed division", "BERT"], [])
    race = rows[:3]
    assert [(r["parsed"], r["gold"], r["score"]) for r in race] == [("yes", "yes", 1.0), (None, "no", 0.0),
                                                                      ("no", "no", 1.0)]  # unreadable is wrong
    mlperf = rows[3:]
    assert [(r["score"], r["exact"]) for r in mlperf] == [(1.0, True), (0.5, False), (0.0, False)]
    assert [r["length"] for r in mlperf] == [15, 43, 4]
    assert all(r["degenerate"] is False for r in rows)
    assert all("exact" not in r for r in race) and all("parsed" not in r for r in mlperf)


def test_score_items_embeds_plp_answers_and_rejects_what_it_cannot_score() -> None:
    gold = "OpenMP schedule(static) divides the iterations into equal chunks before the loop runs."
    plp = [Record(family="plp", prompt=messages(None, f"Explain schedule(static). {i}"), completion=assistant(gold),
                  answer=gold) for i in range(2)]
    rows = score_items(plp, [gold, "the the the the the the"])
    assert rows[0]["score"] == pytest.approx(1.0, abs=1e-5) and rows[1]["score"] < 0.5
    assert rows[1]["degenerate"] is True and rows[0]["degenerate"] is False
    with pytest.raises(ValueError, match="2 records but 1 answers"):
        score_items(plp, ["x"])
    dgemm = Record(family="dgemm", prompt=messages(None, "Write a DGEMM kernel."), completion=[], answer="")
    with pytest.raises(ValueError, match=r"families \['dgemm'\]"):
        score_items([dgemm], ["void dgemm() {}"])


# --- one policy's metrics ----------------------------------------------------------------------------------------

SFT = _rows([("yes", "yes"), ("no", "yes")], [("yes", "no")], ["ResNet-50 v1.5", "BERT"], [("a", 0.6), ("b", 0.4)])


def test_winrate_counts_wins_ties_and_losses_by_each_items_score() -> None:
    # race_c: tie (both right), win (SFT wrong); fortran: tie (both wrong); mlperf: loss (1.0 -> 0.5), tie;
    # plp: the same text "a" with a cosine differing in the last bits is a tie, "c" beats 0.4
    policy = _rows([("yes", "yes"), ("no", "no")], [("yes", "no")], ["It is ResNet-50 v1.5", "BERT"],
                   [("a", 0.6000001), ("c", 0.7)])
    m = method_metrics(policy, SFT)
    points = [0.5, 1.0, 0.5, 0.0, 0.5, 0.5, 1.0]
    assert m["winrate"] == pytest.approx(sum(points) / 7)
    assert method_metrics(SFT, SFT)["winrate"] == 0.5
    assert method_metrics(list(reversed(policy)), SFT)["winrate"] == m["winrate"]  # matched by (family, id)


def test_race_counts_are_pooled_over_c_and_fortran() -> None:
    # race_c: TP, FN, FP; race_fortran: TP, TN, and an unreadable answer to a race-free program: FP
    rows = _rows([("yes", "yes"), ("yes", "no"), ("no", "yes")],
                 [("yes", "Yes."), ("no", "No: private copies."), ("no", "Maybe.")], ["BERT"], [("a", 0.5)])
    m = method_metrics(rows, rows)
    race = m["race"]
    assert (race["tp"], race["fp"], race["fn"], race["tn"], race["unreadable"]) == (2, 2, 1, 1, 1)
    assert (race["precision"], race["recall"]) == pytest.approx((2 / 4, 2 / 3))
    assert m["race_f1"] == pytest.approx(4 / 7) and race["accuracy"] == pytest.approx(3 / 6)
    assert (m["accuracy_race_c"], m["accuracy_race_fortran"]) == pytest.approx((1 / 3, 2 / 3))


def test_lengths_long_share_and_degenerate_share_by_family() -> None:
    answers = ["ResNet-50 v1.5", "", "The benchmark uses ResNet-50 v1.5 as its reference model.",
               "code code code code code code code code code code"]
    rows = _rows([("yes", "yes")], [], answers, [("ok", 0.9), ("fine", 0.2)])
    m = method_metrics(rows, rows)
    lengths = [14, 0, 57, 49]
    assert [r["length"] for r in rows if r["family"] == "mlperf"] == lengths
    assert m["length_by_family"]["mlperf"] == {"mean": pytest.approx(30.0), "median": 31.5, "over_40_share": 0.5}
    assert m["mlperf_length_mean"] == pytest.approx(30.0)
    assert m["degenerate_by_family"] == {"race_c": 0.0, "mlperf": 0.5, "plp": 0.0}  # empty and the loop
    assert m["degenerate_share"] == pytest.approx(2 / 7)
    assert (m["mlperf_em"], m["accuracy_mlperf"]) == (0.25, 0.25)
    assert (m["plp_similarity"], m["accuracy_plp"]) == (pytest.approx(0.55), 0.5)  # cosine >= 0.5 counts
    assert m["race_f1"] == 1.0 and m["accuracy_race_fortran"] is None and m["n"] == {"race_c": 1, "mlperf": 4,
                                                                                     "plp": 2, "all": 7}


def test_different_item_sets_are_an_error_naming_the_items() -> None:
    with pytest.raises(DataError, match=r"1 SFT items have no policy row \(e\.g\. \[\('plp', 'plp-1'\)\]\)"):
        method_metrics(SFT[:-1], SFT)
    extra = [*SFT, _plp(9, "z", 0.1)]
    with pytest.raises(DataError, match=r"1 policy items have no SFT row \(e\.g\. \[\('plp', 'plp-9'\)\]"):
        method_metrics(extra, SFT)
    with pytest.raises(DataError, match="repeat items"):
        method_metrics([*SFT, SFT[0]], SFT)


# --- the comparison report ---------------------------------------------------------------------------------------

def test_comparison_report_blocks_meta_and_per_seed_values(tmp_path: Path) -> None:
    better = _rows([("yes", "yes"), ("no", "no")], [("yes", "yes")], ["ResNet-50 v1.5", "ResNet50"],
                   [("a", 0.6), ("c", 0.9)])
    report = comparison_report(SFT, {"hargo": {2: better, 1: SFT}}, _params())
    assert list(report) == ["sft", "hargo", "meta"]
    hargo = report["hargo"]
    assert hargo["seeds"] == [1, 2] and list(hargo["runs"]) == ["1", "2"] and set(hargo["metrics"]) == set(HEADLINE)
    for name in HEADLINE:  # the bootstrap's observed values are method_metrics' values
        for seed, rows in (("1", SFT), ("2", better)):
            assert hargo["metrics"][name]["seeds"][seed] == pytest.approx(method_metrics(rows, SFT)[name]), name
    win = hargo["metrics"]["winrate"]
    assert win["seeds"] == {"1": 0.5, "2": pytest.approx(5.5 / 7)}  # 3 ties, 4 wins
    assert win["mean"] == pytest.approx((0.5 + 5.5 / 7) / 2)
    assert report["sft"]["metrics"]["winrate"] == {"mean": 0.5, "ci": [0.5, 0.5], "seeds": {"sft": 0.5}}
    meta = report["meta"]
    assert meta["items"] == {"race_c": 2, "race_fortran": 1, "mlperf": 2, "plp": 2, "all": 7}
    assert meta["one_item"] == {"race_c": 0.5, "race_fortran": 1.0, "mlperf": 0.5, "plp": 0.5,
                                "race": pytest.approx(1 / 3), "all": pytest.approx(1 / 7)}
    assert (meta["resamples"], meta["confidence"], meta["seeds"]) == (500, 0.95, {"hargo": [1, 2]})
    write_report(report, tmp_path / "eval_hargo.json")  # valid JSON: no NaN anywhere
    assert json.loads((tmp_path / "eval_hargo.json").read_text())["hargo"]["metrics"]["race_f1"]["mean"] > 0


def test_a_family_without_items_has_null_metrics_and_bad_method_names_are_refused() -> None:
    no_plp = [r for r in SFT if r["family"] != "plp"]
    report = comparison_report(no_plp, {"grpo": {1: no_plp}}, _params())
    assert report["grpo"]["metrics"]["plp_similarity"] is None and report["grpo"]["metrics"]["accuracy_plp"] is None
    assert report["meta"]["items"]["plp"] == 0 and "plp" not in report["meta"]["one_item"]
    with pytest.raises(ValueError, match=r"methods \['sft'\] clash"):
        comparison_report(SFT, {"sft": {1: SFT}}, _params())
    with pytest.raises(ValueError, match=r"methods \['grpo'\] have no seeds"):
        comparison_report(SFT, {"grpo": {}}, _params())


def test_load_items_takes_the_first_items_of_each_family_and_notes_missing_files(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "race_c" / "eval.jsonl", [_race("race_c", "yes", i) for i in range(3)])
    write_jsonl(tmp_path / "mlperf" / "eval.jsonl", [])
    notes: dict[str, str] = {}
    records = load_items(tmp_path, _params(max_items_per_family=2), notes)
    assert [r.id for r in records] == ["race_c-0", "race_c-1"]
    assert set(notes) == {"race_fortran", "mlperf", "plp"} and "dvc repro prepare" in notes["plp"]
    assert "holds no records" in notes["mlperf"]


# --- end to end on a tiny saved model ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(data_dir, model_dir): labelled held-out items of the four task families, an untrained tiny saved model."""
    root = tmp_path_factory.mktemp("hargo")
    data_dir = make_data(root / "data")
    write_jsonl(data_dir / "race_c" / "eval.jsonl", [_race("race_c", g, i) for i, g in enumerate(("yes", "no"))])
    write_jsonl(data_dir / "race_fortran" / "eval.jsonl", [_race("race_fortran", "no", 0)])
    write_jsonl(data_dir / "mlperf" / "eval.jsonl", [_mlperf(i) for i in range(3)])
    model, tokenizer = load_policy(make_params().model, data_dir, seed=3)
    model.save_pretrained(str(root / "model"))
    tokenizer.save_pretrained(str(root / "model"))
    return data_dir, root / "model"


def test_greedy_answers_of_a_saved_model_are_scored_end_to_end(workspace: tuple[Path, Path]) -> None:
    data_dir, model_dir = workspace
    params = _params(max_new_tokens=8, batch_size=3, max_items_per_family=2)
    notes: dict[str, str] = {}
    records = load_items(data_dir, params, notes)
    assert [r.family for r in records] == ["race_c", "race_c", "race_fortran", "mlperf", "mlperf", "plp"]
    assert notes == {}
    lines: list[str] = []
    model, tokenizer = load_saved_policy(model_dir)
    answers = answer_items(model, tokenizer, records, params, lines.append)
    assert len(answers) == 6 and lines[-1] == "answered 6/6"
    rows = evaluate_model(model_dir, records, params)
    assert [r["prediction"] for r in rows] == answers  # greedy: the same answers again
    assert [(r["family"], r["id"]) for r in rows] == [(r.family, r.id) for r in records]
    for row, record in zip(rows, records, strict=True):
        assert row["length"] == len(row["prediction"])
        if record.family.startswith("race"):
            assert row["score"] == float(row["parsed"] == record.answer)
        elif record.family == "mlperf":
            assert row["exact"] == (row["score"] == 1.0) and row["score"] in (0.0, 0.1, 0.2, 0.5, 1.0)
        else:
            assert -1.0 <= row["score"] <= 1.0 and row["gold"] == record.response
    report = comparison_report(rows, {"hargo": {1: rows}}, params)
    assert report["hargo"]["metrics"]["winrate"]["mean"] == 0.5  # the same model ties with itself on every item
