"""The verdict score's separation (hpcrl_core/evaluation/race_scores.py): AUC and best-threshold F1 against hand
counts, which tokens open "yes" and "no", and the score of a model whose first-token probabilities are known.

Run: pytest tests/evaluation/test_race_scores.py
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.race_scores import (
    best_threshold_f1,
    opens_with,
    roc_auc,
    separation,
    verdict_scores,
    verdict_token_ids,
)
from tests.models import sample_tokenizer


def test_auc_counts_pairs_and_half_ties() -> None:
    # racy scores 3, 1; race-free 2, 1: pairs (3>2) (3>1) (1<2) (1=1) -> (1 + 1 + 0 + 0.5) / 4
    assert roc_auc([3, 1, 2, 1], [True, True, False, False]) == pytest.approx(0.625)
    assert roc_auc([5, 4, 1, 0], [True, True, False, False]) == 1.0
    assert roc_auc([0, 1, 4, 5], [True, True, False, False]) == 0.0
    assert roc_auc([2, 2, 2, 2], [True, False, True, False]) == 0.5
    with pytest.raises(DataError, match="racy and race-free"):
        roc_auc([1, 2], [True, True])
    with pytest.raises(ValueError, match="3 scores for 2 labels"):
        roc_auc([1, 2, 3], [True, False])
    with pytest.raises(ValueError, match="3 scores for 1 labels"):
        best_threshold_f1([1, 2, 3], [True])


def test_best_threshold_f1_is_the_highest_f1_over_thresholds() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    racy = [True, False, True, True, False, False]
    # t = 0.6: tp 3, fp 1, fn 0 -> 6 / 7, the best; t = 0.9: 2/4; t = 0.4 (all yes): 6/9
    best, at = best_threshold_f1(scores, racy)
    assert best == pytest.approx(6 / 7) and at == 0.6
    # answering "yes" to everything is one of the thresholds, so the best is never below its F1 2p / (1 + p)
    assert best >= 2 * 0.5 / 1.5
    sep = separation([-1.0, 2.0, 0.5, -3.0], [False, True, True, False])
    assert sep["auc"] == 1.0 and sep["best_threshold_f1"] == 1.0 and sep["f1_at_zero"] == 1.0
    assert sep["yes_share_at_zero"] == 0.5 and sep["n"] == 4 and sep["accuracy_at_zero"] == 1.0
    assert separation([1.0, 1.0, -1.0], [False, True, True])["accuracy_at_zero"] == pytest.approx(1 / 3)


@pytest.mark.parametrize(("piece", "word", "opens"), [
    ("yes", "yes", True), ("ye", "yes", True), (" y", "yes", True), ("yes: `", "yes", True), ("Yes,", "yes", True),
    ("yesterday", "yes", False), ("no", "no", True), ("no: `", "no", True), ("n", "no", True),
    ("none", "no", False), ("not", "no", False), ("", "no", False), ("**no", "no", True), ("x", "yes", False),
    ("\u0120yes", "yes", True), ("\u2581No", "no", True), ("\tno:", "no", True),
])
def test_which_token_texts_open_an_answer(piece: str, word: str, opens: bool) -> None:
    assert opens_with(piece, word) is opens


class FixedLogits:
    """A stand-in model whose next-token logits are the same for every input."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits

    def eval(self) -> FixedLogits:
        return self

    def __call__(self, input_ids: torch.Tensor) -> SimpleNamespace:
        return SimpleNamespace(logits=self.logits.expand(1, input_ids.shape[1], -1))


def test_the_score_is_the_log_ratio_of_yes_and_no_openings() -> None:
    tok = sample_tokenizer()
    yes, no = verdict_token_ids(tok)
    # the first token of every way the house completions open is counted on its side
    for text, side in (("yes: `a`", yes), ("Yes,", yes), ("no: `a`", no), ("No.", no)):
        assert tok.encode(text, add_special_tokens=False)[0] in side, text
    for text in ("none", "not", "yesterday"):
        ids = tok.encode(text, add_special_tokens=False)
        if len(ids) == 1:  # a whole-word token of another word is on neither side
            assert ids[0] not in yes and ids[0] not in no, text
    # mass 0.3 spread over the yes-openers, 0.1 over the no-openers, the rest on one other token
    probs = torch.zeros(len(tok))
    probs[yes] = 0.3 / len(yes)
    probs[no] = 0.1 / len(no)
    other = next(i for i in range(len(tok)) if i not in yes and i not in no)
    probs[other] = 0.6
    model = FixedLogits(probs.log())
    prompts = [[{"role": "user", "content": "Does it race?"}], [{"role": "user", "content": "int x;\n" * 40}]]
    scores = verdict_scores(model, tok, prompts)
    assert scores == pytest.approx([math.log(3.0)] * 2, abs=1e-5)


class _Vocabulary:
    """A stand-in tokenizer whose vocabulary is the given token texts."""

    name_or_path = "stand-in"

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces

    def __len__(self) -> int:
        return len(self.pieces)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[i] for i in ids)


def test_a_vocabulary_that_cannot_write_both_words_is_refused_by_name() -> None:
    assert verdict_token_ids(_Vocabulary(["a", "ye", "n", "x"])) == ([1], [2])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'stand-in' has 1 tokens that open 'yes' and 0 that open 'no'"):
        verdict_token_ids(_Vocabulary(["a", " yes", "none", "x"]))  # type: ignore[arg-type]
