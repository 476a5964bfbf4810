"""How much a race verdict separates racy programs from race-free ones, apart from where its threshold sits.

Greedy answers give one F1 that mixes two things: whether the policy ranks racy programs above race-free ones at
all, and where its yes/no boundary falls. F1 rewards a boundary pushed towards "yes" (answering "yes" to everything
scores 2p / (1 + p) on a set with a share p of racy programs, 0.67 at one half), so a policy that learned nothing
can look close to one that learned a little. This module reads the verdict as a score instead:

- **verdict score** of a program: log P(the answer opens with "yes") - log P(it opens with "no") at the first
  answer token, summed over the vocabulary entries that can start each word (``verdict_token_ids``). It reads a
  policy trained to open its answer with the verdict, as hpcrl's race completions do; for one that reasons first
  (``race_scale.py --reason-first``) it measures nothing, and ``race_programs`` reports the share of greedy answers
  that open with "yes" or "no" beside it;
- **AUC**: the probability that a random racy program scores above a random race-free one (ties count half);
  0.5 is no separation whatever the threshold;
- **best-threshold F1**: the highest F1 any threshold on the score reaches on the set. It is the ceiling for
  recalibrating the verdict (a bias towards "yes" or "no"): if it is below a target, no calibration meets it.

Test: ``pytest tests/evaluation/test_race_scores.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from transformers import PreTrainedTokenizerBase

from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.generate import render_prompts


def opens_with(piece: str, word: str) -> bool:
    """Whether a token's text can begin the answer ``word``: a non-empty prefix of it, or the word followed by
    something that is not a letter (``yes:``, ``no,``; not ``none`` or ``yesterday``)."""
    piece = piece.lstrip(" \t\r\n*\u0120\u2581").lower()  # spaces, markup and byte-level / sentencepiece markers
    if not piece:
        return False
    if word.startswith(piece):
        return True
    return piece.startswith(word) and not piece[len(word)].isalpha()


def verdict_token_ids(tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """The vocabulary ids whose text can open a "yes" answer and those that can open a "no" answer.

    Raises:
        ConfigError: the vocabulary has no token that opens one of the two words (the model cannot be scored).
    """
    pieces = [str(tokenizer.decode([i])) for i in range(len(tokenizer))]
    yes = [i for i, p in enumerate(pieces) if opens_with(p, "yes")]
    no = [i for i, p in enumerate(pieces) if opens_with(p, "no")]
    if not yes or not no:
        raise ConfigError(f"the tokenizer {getattr(tokenizer, 'name_or_path', '')!r} has {len(yes)} tokens that open "
                          f"'yes' and {len(no)} that open 'no'; a verdict score needs both: pass a model whose "
                          "vocabulary can write both words")
    return yes, no


def verdict_scores(model: Any, tokenizer: PreTrainedTokenizerBase,
                   prompts: Sequence[list[dict[str, str]]]) -> list[float]:
    """The verdict score of each chat prompt (one forward pass each, so any length the model takes is fine).

    Returns:
        Per prompt, log P(yes-opening token) - log P(no-opening token) at the first answer position.
    """
    yes, no = (torch.tensor(ids) for ids in verdict_token_ids(tokenizer))
    out = []
    model.eval()
    for text in render_prompts(tokenizer, prompts):
        ids = tokenizer(text, return_tensors="pt", add_special_tokens=False)["input_ids"]  # (1, T)
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, -1].float(), dim=-1)  # (V,)
        out.append(float(torch.logsumexp(logp[yes], 0) - torch.logsumexp(logp[no], 0)))
    return out


def roc_auc(scores: Sequence[float], racy: Sequence[bool]) -> float:
    """P(score of a random racy program > score of a random race-free one), ties counted half.

    Raises:
        ValueError: lengths differ (a caller's bug).
        DataError: one of the two classes is empty (the items cannot be ranked).
    """
    s, y = np.asarray(scores, float), np.asarray(racy, bool)
    if len(s) != len(y):
        raise ValueError(f"{len(s)} scores for {len(y)} labels")
    pos, neg = s[y], s[~y]
    if not len(pos) or not len(neg):
        raise DataError(f"AUC needs racy and race-free programs; got {len(pos)} racy, {len(neg)} race-free")
    greater = (pos[:, None] > neg[None, :]).sum()
    ties = (pos[:, None] == neg[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(pos) * len(neg)))


def _f1(pred: np.ndarray, racy: np.ndarray) -> float:
    """F1 of boolean predictions against boolean labels (positive = racy); 0 when there is nothing to count."""
    tp = int((pred & racy).sum())
    denom = 2 * tp + int((pred & ~racy).sum()) + int((~pred & racy).sum())
    return 2 * tp / denom if denom else 0.0


def best_threshold_f1(scores: Sequence[float], racy: Sequence[bool]) -> tuple[float, float]:
    """The highest F1 (positive = racy) of "racy when score >= t" over every threshold t, and that t.

    Thresholds are every distinct score and one above the highest ("no" to everything, F1 0).
    """
    s, y = np.asarray(scores, float), np.asarray(racy, bool)
    if len(s) != len(y):
        raise ValueError(f"{len(s)} scores for {len(y)} labels")
    best, at = 0.0, float("inf")
    for t in np.unique(s):
        f1 = _f1(s >= t, y)
        if f1 > best:
            best, at = f1, float(t)
    return best, at


def separation(scores: Sequence[float], racy: Sequence[bool]) -> dict[str, Any]:
    """AUC, best-threshold F1 and its threshold, and the F1, accuracy and "yes" share at the model's own boundary
    (racy when score > 0)."""
    s, y = np.asarray(scores, float), np.asarray(racy, bool)
    pred = s > 0
    best, at = best_threshold_f1(scores, racy)
    return {"n": int(len(s)), "auc": roc_auc(scores, racy), "best_threshold_f1": best, "best_threshold": at,
            "f1_at_zero": _f1(pred, y), "yes_share_at_zero": float(pred.mean()) if len(s) else 0.0,
            "accuracy_at_zero": float((pred == y).mean()) if len(s) else 0.0}
