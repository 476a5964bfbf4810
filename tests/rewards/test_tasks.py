"""Tests of the HARGO task rewards: hand-checked values per family and tier, the router on a mixed batch, and the
errors a badly built dataset gets. PLP uses the bundled all-MiniLM-L6-v2 for real (CPU, offline, a few texts).

Run: ``.venv/bin/python -m pytest -q tests/rewards/test_tasks.py``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.config.hargo import TASK_FAMILIES as CONFIG_TASK_FAMILIES
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.embeddings import embed
from hpcrl_core.rewards import RewardContext, get_reward
from hpcrl_core.rewards.tasks import (
    TASK_FAMILIES,
    TaskReward,
    keyword_overlap,
    mlperf_key,
    mlperf_reward,
    plp_rewards,
    race_reward,
)

REF = "CodeSearchNet covers six programming languages: Go, Java, JavaScript, PHP, Python and Ruby."
PARAPHRASE = "CodeSearchNet spans six languages, namely Go, Java, JavaScript, PHP, Python and Ruby, and serves code " \
             "search research."  # 118 characters
LOOP = "code code code code code code code code code code"
TEN = "alpha beta gamma delta epsilon zeta eta theta iota kappa"  # ten content tokens


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may reach the Hub."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def _reward(name: str, **task_reward: Any) -> TaskReward:
    fn = get_reward(name)(RewardContext(parse_params({"task_reward": task_reward})))
    assert isinstance(fn, TaskReward)
    return fn


def _cosine(a: str, b: str) -> float:
    v = embed([a, b])
    return float(v[0] @ v[1])


# --- race ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "answer", "expected"), [
    ("yes", "yes", 1.0), ("Yes", "yes", 1.0), ("  NO.\n", "no", 1.0), ("no", " No ", 1.0), ("yes.", "yes", 1.0),
    ("yes: the loop carries a dependence.", "yes", 1.0), ("Yes, because a[i+1] is written by another thread.", "yes",
                                                           1.0),
    ("no: each thread writes its own element.", "yes", 0.0), ("no", "yes", 0.0), ("", "yes", 0.0),
    ("**Yes**", "yes", 0.0), ("Answer: yes", "yes", 0.0), ("The answer is yes", "yes", 0.0),
    ("yesterday", "yes", 0.0), ("yes_or_no", "yes", 0.0), ("nothing races", "no", 0.0), ("no2", "no", 0.0),
])
def test_race_reward_reads_the_leading_verdict(text: str, answer: str, expected: float) -> None:
    assert race_reward(text, answer) == expected


def test_race_reward_refuses_a_reference_that_is_no_verdict() -> None:
    with pytest.raises(DataError, match="'maybe' is not a verdict"):
        race_reward("yes", "maybe")


# --- MLPerf --------------------------------------------------------------------------------------------------------

RESNET = ("ResNet-50 v1.5", ["ResNet50 v1.5", "ResNet-50 version 1.5"], ["ResNet"])
BERT_ACC = ("0.720 masked LM accuracy", [], [])
SCENARIOS = ("Server and Offline", [], [])
MAP = ("0.377 box mAP and 0.339 mask mAP", [], [])


@pytest.mark.parametrize(("text", "ref", "expected"), [
    ("resnet 50 v1.5.", RESNET, 1.0),  # case, spacing, punctuation
    ("RESNET-50 VERSION 1.5", RESNET, 1.0),  # an alias
    ("0.72 masked LM accuracy", BERT_ACC, 1.0),  # numeric: 0.72 = 0.720
    ("72% masked-LM accuracy", BERT_ACC, 1.0),  # numeric: 72% = 0.72
    ("1,000 GPUs", ("1000 GPUs", [], []), 1.0),
    ("Offline, Server", SCENARIOS, 1.0),  # the listed values, in another order
    ("ResNet", RESNET, 0.5),  # a partial entry
    ("Server", SCENARIOS, 0.5),  # some of the values
    ("Server, Offline and Edge", SCENARIOS, 0.5),  # all of them and a wrong one
    ("0.3390 mask mAP", MAP, 0.5),  # one of two numbers, numerically
    ("Server or Offline", SCENARIOS, 0.2),  # a hedge is not the list: overlap 2/2
    ("It is ResNet-50 v1.5", RESNET, 0.2),  # all content tokens, not the fact alone
    ("0.73 masked LM accuracy", BERT_ACC, 0.2),  # 3 of 4 content tokens: the number is wrong
    ("ResNet", ("ResNet-50 v1.5", [], []), 0.0),  # 1 of 4 content tokens, no partial entry
    ("", RESNET, 0.0), ("...", RESNET, 0.0), ("15", ("1 5", [], []), 0.0),
])
def test_mlperf_tiers(text: str, ref: tuple[str, list[str], list[str]], expected: float) -> None:
    assert mlperf_reward(text, *ref) == expected


@pytest.mark.parametrize(("shared", "expected"), [(8, 0.2), (7, 0.1), (5, 0.1), (4, 0.0)])
def test_mlperf_keyword_tiers_are_strictly_above_70_and_40_percent(shared: int, expected: float) -> None:
    prediction = " ".join(TEN.split()[:shared]) + " the of and"  # stopwords count for nothing
    assert keyword_overlap(prediction, TEN) == Fraction(shared, 10)
    assert mlperf_reward(prediction, TEN, [], []) == expected


def test_keyword_overlap_takes_the_best_reference_and_skips_stopwords() -> None:
    assert keyword_overlap("SSD ResNet backbone", "SSD with a ResNet-34 backbone") == Fraction(3, 4)
    assert keyword_overlap("anything", "the of") is None
    # 2 of the answer's 6 content tokens (0.0 alone), all 3 of the alias's: the alias decides the tier
    answer, alias = "Single Shot Detector with a ResNet-34 backbone", "SSD ResNet-34"
    assert mlperf_reward("SSD ResNet-34 model", answer, [], []) == 0.0
    assert mlperf_reward("SSD ResNet-34 model", answer, [alias], []) == 0.2


def test_mlperf_key_ignores_formatting_but_keeps_numbers_apart() -> None:
    assert mlperf_key("Resnet 50 v1.50") == mlperf_key("ResNet-50 v1.5") == "resnet<50>v<1.5>"
    assert mlperf_key("DeepLabv3+") != mlperf_key("DeepLabv3")
    assert mlperf_key("1 5") != mlperf_key("15")


def test_mlperf_reward_refuses_a_reference_without_tokens() -> None:
    with pytest.raises(DataError, match="reference answer '--' has no word or number"):
        mlperf_reward("ImageNet", "--", [], [])


# --- PLP -----------------------------------------------------------------------------------------------------------

def test_plp_reward_is_cosine_plus_bonus_for_a_real_answer() -> None:
    params = parse_params({}).task_reward
    rewards, cosines = plp_rewards([REF, PARAPHRASE], [REF, REF], params)
    assert cosines[0] == pytest.approx(1.0, abs=1e-5)
    assert cosines[1] == pytest.approx(_cosine(PARAPHRASE, REF), abs=1e-5)
    assert 0.5 < cosines[1] < 0.99  # a paraphrase is close, not the same
    assert rewards == pytest.approx([cosines[0] + 0.1, cosines[1] + 0.1], abs=1e-9)


def test_plp_reward_gives_no_bonus_to_a_degenerate_answer_and_nothing_to_an_empty_one() -> None:
    rewards, cosines = plp_rewards([LOOP, "", "  \n"], [REF, REF, REF], parse_params({}).task_reward)
    assert cosines[0] == pytest.approx(_cosine(LOOP, REF), abs=1e-5) and cosines[0] != 0.0
    assert rewards[0] == pytest.approx(cosines[0], abs=1e-9)  # the loop keeps its cosine, loses the bonus
    assert rewards[1:] == cosines[1:] == [0.0, 0.0]


@pytest.mark.parametrize(("over", "penalty"), [(0, 0.0), (1, 0.001), (100, 0.1)])
def test_plp_length_penalty_per_character_over_the_budget(over: int, penalty: float) -> None:
    base = _reward("plp_similarity", plp_length_budget=len(PARAPHRASE))
    fn = _reward("plp_similarity", plp_length_budget=len(PARAPHRASE) - over)
    # surrounding whitespace does not count as length
    within, beyond = base(completions=[PARAPHRASE], answer=[REF]), fn(completions=[f"  {PARAPHRASE}\n"], answer=[REF])
    assert within[0] == pytest.approx(_cosine(PARAPHRASE, REF) + 0.1, abs=1e-5)
    assert within[0] - beyond[0] == pytest.approx(penalty, abs=1e-9)


def test_plp_reward_refuses_a_blank_reference() -> None:
    with pytest.raises(DataError, match="item 1 has a blank reference"):
        plp_rewards(["a", "b"], [REF, " "], parse_params({}).task_reward)


# --- the router and the column contract ----------------------------------------------------------------------------

MIXED: dict[str, list[Any]] = {
    "completions": ["Yes", "Server", PARAPHRASE, "no, since the loop is private", LOOP, "72% masked LM accuracy",
                    [{"role": "assistant", "content": "NO."}]],
    "family": ["race_c", "mlperf", "plp", "race_fortran", "plp", "mlperf", "race_fortran"],
    "answer": ["yes", "Server and Offline", REF, "no", REF, "0.720 masked LM accuracy", "no"],
    "aliases": [[], ["Offline and Server"], [], [], None, ["72.0% masked LM accuracy"], []],
    "partial": [[], [], [], [], [], ["0.72"], []],
}


def test_router_scores_each_item_as_its_own_familys_reward() -> None:
    metrics: dict[str, float] = {}
    mixed = _reward("hpc_tasks")(**MIXED, prompts=["p"] * 7, log_metric=metrics.__setitem__, id=list("abcdefg"))
    alone = [0.0] * 7
    for name, families in (("race_verdict", {"race_c", "race_fortran"}), ("mlperf_tiered", {"mlperf"}),
                           ("plp_similarity", {"plp"})):
        rows = [i for i, f in enumerate(MIXED["family"]) if f in families]
        batch = {k: [v[i] for i in rows] for k, v in MIXED.items()}
        for i, r in zip(rows, _reward(name)(**batch), strict=True):
            alone[i] = r
    assert mixed == pytest.approx(alone, abs=1e-6)
    assert [mixed[i] for i in (0, 1, 3, 5, 6)] == [1.0, 0.5, 1.0, 1.0, 1.0]  # "no, since ..." reads as "no"
    assert mixed[2] == pytest.approx(_cosine(PARAPHRASE, REF) + 0.1, abs=1e-5)
    assert mixed[4] == pytest.approx(_cosine(LOOP, REF), abs=1e-5)
    assert metrics["reward/mlperf/mean"] == 0.75 and metrics["reward/mlperf/exact_share"] == 0.5
    assert metrics["reward/race_fortran/share"] == pytest.approx(2 / 7) and metrics["reward/plp/bonus_share"] == 0.5


def test_router_refuses_an_unknown_family_naming_the_known_ones() -> None:
    with pytest.raises(DataError, match=r"item 1 has family 'dgemm'.*known families: race_c, race_fortran, mlperf, "
                                        r"plp"):
        _reward("hpc_tasks")(completions=["yes", "x"], family=["race_c", "dgemm"], answer=["yes", "y"],
                             aliases=[[], []], partial=[[], []])


def test_a_family_reward_refuses_another_familys_item() -> None:
    with pytest.raises(DataError, match="item 0 has family 'plp'.*use hpc_tasks"):
        _reward("race_verdict")(completions=["yes"], family=["plp"], answer=["yes"])


def test_columns_missing_or_misaligned_are_config_errors() -> None:
    router = _reward("hpc_tasks")
    with pytest.raises(ConfigError, match="needs the dataset column 'family'"):
        router(completions=["yes"], answer=["yes"])
    with pytest.raises(ConfigError, match="column 'answer' must hold one entry per completion; got 1 entries for 2"):
        router(completions=["yes", "no"], family=["race_c"] * 2, answer=["yes"])
    with pytest.raises(ConfigError, match="needs the dataset column 'aliases'"):
        router(completions=["ImageNet"], family=["mlperf"], answer=["ImageNet"])
    # a batch without MLPerf items needs no MLPerf columns; a one-family reward needs no family column
    assert router(completions=["yes", "no"], family=["race_c", "race_fortran"], answer=["yes", "yes"]) == [1.0, 0.0]
    assert _reward("mlperf_tiered")(completions=["ImageNet-1k"], answer=["ImageNet"], aliases=[["ImageNet-1k"]],
                                    partial=[[]]) == [1.0]


def test_malformed_entries_are_data_errors() -> None:
    with pytest.raises(DataError, match=r"aliases\[0\] is 'ImageNet-1k'; it must be a list of strings"):
        _reward("mlperf_tiered")(completions=["x"], answer=["ImageNet"], aliases=["ImageNet-1k"], partial=[[]])
    with pytest.raises(DataError, match=r"answer\[0\] is None; it must be a string"):
        _reward("race_verdict")(completions=["yes"], answer=[None])


def test_the_router_covers_every_task_family_of_the_config() -> None:
    assert set(TASK_FAMILIES) == set(CONFIG_TASK_FAMILIES)
    assert _reward("hpc_tasks").families == TASK_FAMILIES
