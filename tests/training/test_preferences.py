"""Preference pairs (hpcrl_core/training/preferences.py): best chosen, worst rejected, ties dropped and counted,
scored by the same rewards RL uses, written whole or not at all.

Run: ``.venv/bin/python -m pytest tests/training/test_preferences.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.data.schema import Record, assistant, messages, write_jsonl
from hpcrl_core.errors import DataError
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.models.tokenizer import save_tokenizer
from hpcrl_core.provenance import model_hash
from hpcrl_core.training import preferences as prefs
from hpcrl_core.training.pairs import PAIRS_FILE, load_pairs
from hpcrl_core.training.run_record import rewards_record
from tests.models import TINY, sample_tokenizer


def _row(family: str, i: int, answer: str = "yes") -> dict[str, Any]:
    return {"prompt": messages(None, f"Question {i}?"), "family": family, "answer": answer, "aliases": [],
            "partial": [], "item_id": f"{family}-{i}"}


def test_best_is_chosen_worst_rejected_and_ties_give_no_pair() -> None:
    rows = [_row("race_c", 0), _row("race_c", 1), _row("mlperf", 2), _row("mlperf", 3)]
    answers = [["no.", "yes.", "maybe"], ["yes", "yes"], ["a", "b"], ["x", "y", "z"]]
    rewards = [[0.0, 1.0, 0.0], [1.0, 1.0], [0.2, 0.2], [0.1, 0.5, 1.0]]
    pairs, card = prefs.build_pairs(rows, answers, rewards)
    assert [(p["item_id"], p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs] == \
        [("race_c-0", "yes.", "no."), ("mlperf-3", "z", "x")]  # the first of equal worst answers
    assert pairs[0]["prompt"] == rows[0]["prompt"] and pairs[0]["chosen"][0]["role"] == "assistant"
    assert (pairs[1]["chosen_reward"], pairs[1]["rejected_reward"]) == (1.0, 0.1)
    assert card["families"]["race_c"] == {"prompts": 2, "pairs": 1, "ties": 1, "tie_share": 0.5,
                                          "reward_gap": {"mean": 1.0, "median": 1.0, "min": 1.0, "max": 1.0}}
    assert card["total"]["pairs"] == 2 and card["total"]["ties"] == 2 and card["total"]["reward_gap"]["mean"] == 0.95
    with pytest.raises(ValueError, match="two or more answers"):
        prefs.build_pairs(rows[:1], [["only"]], [[1.0]])
    with pytest.raises(ValueError, match="one of each per prompt"):
        prefs.build_pairs(rows, answers[:2], rewards)


def test_answers_are_scored_by_the_rl_rewards() -> None:
    params = parse_params({})
    rows = [_row("race_c", 0, "yes"), _row("race_fortran", 1, "no"),
            {**_row("mlperf", 2, "0.720"), "aliases": ["72%"], "partial": []}]
    scores = prefs.score_answers(params, rows, [["yes: a race", "no"], ["no race here", "yes"], ["72%", "unknown"]])
    assert scores == [[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]


def test_load_pairs_refuses_missing_empty_and_malformed_files(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    with pytest.raises(DataError, match="dvc repro preferences"):
        load_pairs(path)
    path.write_text("\n")
    with pytest.raises(DataError, match="holds no preference pairs"):
        load_pairs(path)
    good = {"prompt": messages(None, "Q?"), "chosen": assistant("A."), "rejected": assistant("B.")}
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "rejected": "B."}) + "\n")
    with pytest.raises(DataError, match=r"pairs.jsonl:2: field 'rejected' must be a non-empty list of chat messages"):
        load_pairs(path)
    path.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(DataError, match=r"pairs.jsonl:2: not valid JSON"):
        load_pairs(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_pairs(path) == [good]


def test_make_preferences_samples_the_sft_start_and_writes_pairs_and_card(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for family, answers in {"race_c": ["yes", "no"] * 3, "race_fortran": ["no", "yes"] * 3,
                            "mlperf": ["0.720", "ResNet-50", "BERT"], "plp": ["A corpus of C code."]}.items():
        write_jsonl(data / family / "rl.jsonl", [
            Record(family, messages(None, f"{family} question {i}?"), assistant(a), a,
                   metadata={"aliases": [], "partial": []} if family == "mlperf" else {})
            for i, a in enumerate(answers)])
    sft = tmp_path / "sft"
    build_tiny_model(TINY, sample_tokenizer(), seed=3).save_pretrained(str(sft))
    save_tokenizer(sample_tokenizer(), sft)
    # A random tiny policy writes random text: race answers rarely start with yes/no, so most race prompts tie at 0;
    # eight samples at temperature 1.5 give the PLP cosine (never exactly equal) a pair.
    params = parse_params({"preferences": {"samples": 8, "temperature": 1.5, "max_new_tokens": 8}})
    out = tmp_path / "preferences"
    lines: list[str] = []
    card = prefs.make_preferences(params, data, sft, out, progress=lines.append)
    assert lines and lines[-1] == "sampled 16/16 prompts"
    pairs = load_pairs(out / PAIRS_FILE)
    assert len(pairs) == card["total"]["pairs"] >= 1
    assert card["total"]["prompts"] == 16 and card["total"]["pairs"] + card["total"]["ties"] == 16
    assert all(p["chosen_reward"] > p["rejected_reward"] for p in pairs)
    assert json.loads((out / prefs.CARD_FILE).read_text()) == card
    assert card["start"] == model_hash(sft) and card["rewards"] == rewards_record(params)  # what offline runs record
    assert "| plp | 1 |" in (out / "card.md").read_text()
    tied = parse_params({"preferences": {"samples": 2, "temperature": 1.0, "max_new_tokens": 1},
                         "rl_hargo": {"families": ["race_c"]}})
    with pytest.raises(DataError, match="none of the 6 prompts gave a pair"):  # one random token never says yes/no
        prefs.make_preferences(tied, data, sft, tmp_path / "none")
    assert not (tmp_path / "none").exists() and (out / PAIRS_FILE).exists()
