"""Tests of the task metrics: race verdict parsing, race F1, MLPerf scores, WinRate.

Run: ``.venv/bin/python -m pytest tests/evaluation/test_metrics.py -q``.
"""

from __future__ import annotations

import pytest

from hpcrl_core.data.qa.mlperf import generate_mlperf_items
from hpcrl_core.data.race.generator import generate_race_items
from hpcrl_core.evaluation.metrics import mlperf_scores, parse_race_answer, race_f1, winrate

RACE_CASES = [
    # first word
    ("yes: the loop writes a[i+1] while another thread reads it.", "yes"),
    ("no: each iteration writes its own element.", "no"),
    ("Yes:", "yes"),
    ("YES", "yes"),
    ("no.", "no"),
    ("No, the reduction clause makes it safe.", "no"),
    ("  \n**Yes** - sum is shared", "yes"),
    ("Answer: no", "no"),
    ("No data race here.", "no"),
    # the first word must be a whole word
    ("Yesterday I saw a program; this one contains a data race.", "yes"),
    ("Nothing is shared, so it is race-free.", "no"),
    ("Nothing to report.", None),
    ("Yesterday's build was fine.", None),
    ("Nobody knows.", None),
    # phrases, negation wins
    ("The program contains a data race on sum.", "yes"),
    ("This code has a data race.", "yes"),
    ("There is a race between the two writes.", "yes"),
    ("This program does not contain a data race.", "no"),
    ("The kernel doesn't have a data race.", "no"),
    ("I think there is no data race in this loop.", "no"),
    ("The loop is race-free thanks to the private clause.", "no"),
    ("The code is free of data races.", "no"),
    ("It contains no data race.", "no"),
    ("It has a data race? It does not contain a data race.", "no"),
    # unreadable
    ("", None),
    ("I am not sure.", None),
    ("The program uses OpenMP.", None),
]


@pytest.mark.parametrize(("text", "expected"), RACE_CASES)
def test_parse_race_answer(text: str, expected: str | None) -> None:
    assert parse_race_answer(text) == expected


def test_parse_race_answer_reads_generated_completions() -> None:
    """Every SFT target of the race generator parses back to its own label."""
    records = generate_race_items("c", 1, seed=0) + generate_race_items("fortran", 1, seed=0)
    assert {r.answer for r in records} == {"yes", "no"}
    assert all(parse_race_answer(r.response) == r.answer for r in records)


def test_race_f1_hand_computed() -> None:
    # gold:  y    y    y    n    n    n
    # pred:  y    y    n    y    n    n   -> tp 2, fn 1, fp 1, tn 2
    preds = ["yes: a", "It contains a data race.", "no.", "Yes", "race-free", "No"]
    gold = ["yes", "yes", "yes", "no", "no", "no"]
    m = race_f1(preds, gold)
    assert (m["tp"], m["fp"], m["fn"], m["tn"], m["unreadable"], m["n"]) == (2, 1, 1, 2, 0, 6)
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 / 3)
    assert m["accuracy"] == pytest.approx(4 / 6)


def test_race_f1_unreadable_is_always_an_error() -> None:
    # gold yes + unreadable -> FN; gold no + unreadable -> FP
    preds = ["hmm", "I cannot tell", "yes", "no"]
    gold = ["yes", "no", "yes", "no"]
    m = race_f1(preds, gold)
    assert (m["tp"], m["fp"], m["fn"], m["tn"], m["unreadable"]) == (1, 1, 1, 1, 2)
    assert m["precision"] == pytest.approx(0.5)
    assert m["recall"] == pytest.approx(0.5)
    assert m["accuracy"] == pytest.approx(0.5)


def test_race_f1_all_negative_gold_is_zero_division_safe() -> None:
    m = race_f1(["no", "No: private."], ["no", "NO "])
    assert (m["tp"], m["fp"], m["fn"], m["tn"]) == (0, 0, 0, 2)
    assert (m["precision"], m["recall"], m["f1"]) == (0.0, 0.0, 0.0)
    assert m["accuracy"] == 1.0
    m = race_f1(["yes", "???"], ["no", "no"])
    assert (m["fp"], m["tn"], m["unreadable"], m["accuracy"]) == (2, 0, 1, 0.0)


def test_race_f1_perfect_and_empty() -> None:
    assert race_f1(["yes", "no"], ["yes", "no"])["f1"] == 1.0
    assert race_f1([], [])["accuracy"] == 0.0


def test_race_f1_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="2 predictions but 1 gold"):
        race_f1(["yes", "no"], ["yes"])
    with pytest.raises(ValueError, match=r"gold\[1\] is 'maybe'"):
        race_f1(["yes", "no"], ["yes", "maybe"])


def test_mlperf_scores_on_generated_records() -> None:
    records = generate_mlperf_items(seed=0, paraphrases=1)[:3]
    assert len(records) == 3
    answer0 = records[0].answer
    predictions = [
        f"  {answer0.upper()}. ",  # exact up to case/punctuation -> 1.0
        f"I believe it is {records[1].answer} overall",  # contained as a phrase -> 0.5
        "zzqx unrelated",  # nothing shared -> 0.0
    ]
    m = mlperf_scores(predictions, records)
    assert m["n"] == 3
    assert m["exact_match"] == pytest.approx(1 / 3)
    assert m["tiered_score"] == pytest.approx((1.0 + 0.5 + 0.0) / 3)


def test_mlperf_scores_accepts_reward_columns_and_checks_lengths() -> None:
    refs = [{"answer": "ResNet-50 v1.5", "metadata": {"aliases": ["ResNet50"], "partial": []}}]
    assert mlperf_scores(["resnet50"], refs) == {"exact_match": 1.0, "tiered_score": 1.0, "n": 1}
    with pytest.raises(ValueError, match="1 predictions but 0 records"):
        mlperf_scores(["x"], [])


@pytest.mark.parametrize(("a", "b", "expected"), [
    ([1.0, 0.5, 0.2, 0.0], [0.5, 0.5, 1.0, 0.0], (1 + 0.5 + 0 + 0.5) / 4),
    ([1.0, 1.0], [0.0, 0.0], 1.0),
    ([0.0, 0.0], [1.0, 1.0], 0.0),
    ([0.3], [0.3], 0.5),
])
def test_winrate(a: list[float], b: list[float], expected: float) -> None:
    assert winrate(a, b) == pytest.approx(expected)


def test_winrate_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="2 scores for A but 1 for B"):
        winrate([1.0, 0.0], [1.0])
    with pytest.raises(ValueError, match="no items"):
        winrate([], [])
