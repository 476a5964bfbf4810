"""Constrained openings: every answer opens with one of a fixed set of texts, by masking the tokens that would leave
the set while the answer is still inside its opening (a logits processor for ``model.generate``).

For DGEMM the set is the corpus's plan openings (``data.dgemm.corpus.plan_openings``: the code fence, then
``// plan: <kind>: <parameters>`` of a corpus kernel, then the newline). A tiny policy otherwise samples plan lines
that join two kernels' descriptions (parameters ``tile-vec4-ext-64-loops-kb-omp``, in no corpus kernel)
and then writes code with names from both (undeclared ``KB``, ``v4d`` used where only ``__m256d`` is declared):
the constraint keeps the plan a kernel the policy was trained on, and leaves the code after it free. Which kernel,
and how the code goes, are still the policy's choice; a plan the corpus lacks cannot be chosen.

The check is on text, not on token ids: a token is allowed when the answer's text with it is still a prefix of an
opening, or runs past a whole opening (``"\\n#include"`` ends the plan line and opens the code). So any token
sequence that spells an opening passes, including the ones the tokenizer's merges give (the DGEMM tokenizer holds
``// plan: packed: packed-`` as one token). Once the answer holds a whole opening, or its text has left every
opening (possible only from a given prefix outside the set), that row is free.

Token texts are each id decoded alone; ``OpeningVocabulary`` refuses a tokenizer whose pieces do not concatenate
to the openings' text (SentencePiece's leading-space marker, for one), since the check would then be wrong.

Sampling: the masked tokens get ``-inf`` after the model's other processors (temperature included); with top-k or
top-p a row whose kept tokens are all masked is left unmasked rather than sampled from nothing. The sampled tokens'
log-probabilities are the unconstrained policy's (what GRPO trains), so in RL the constraint is a change of the
sampling distribution, like the forced openings of ``rl_dgemm.fence_given``.

Use::

    vocab = OpeningVocabulary(tokenizer, plan_openings(corpus, plan_line, plan_permitted, "evaluate.dgemm_..."))
    model.generate(..., logits_processor=LogitsProcessorList([vocab.processor(prefixes)]))

Test: ``pytest tests/evaluation/test_openings.py``.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import torch
from transformers import LogitsProcessor

from hpcrl_core.errors import ConfigError

__all__ = ["OpeningConstraint", "OpeningVocabulary"]


class OpeningVocabulary:
    """The openings and the tokenizer's piece texts, computed once; ``processor`` gives the per-``generate`` state.

    Raises:
        ConfigError: no openings, an empty one, one that begins another, or a tokenizer whose pieces do not spell
            an opening's text.
    """

    def __init__(self, tokenizer: Any, openings: Sequence[str]) -> None:
        self.openings = sorted(set(openings))
        if not self.openings or not all(self.openings):
            raise ConfigError("constrained openings need at least one opening, and no empty one")
        nested = [(a, b) for a, b in zip(self.openings, self.openings[1:], strict=False) if b.startswith(a)]
        if nested:
            raise ConfigError(f"the opening {nested[0][0]!r} begins another ({nested[0][1]!r}): where one ends must "
                              "be clear")
        size = max(len(tokenizer), int(getattr(tokenizer, "vocab_size", 0) or 0))
        self.pieces = [str(tokenizer.decode([i], clean_up_tokenization_spaces=False)) for i in range(size)]
        for text in self.openings:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            if "".join(self.pieces[i] for i in ids) != text:
                raise ConfigError(f"the tokenizer's pieces do not spell the opening {text!r} when decoded one by one; "
                                  "constrained openings cannot check this tokenizer's text")
        self.by_text: dict[str, list[int]] = {}
        for i, piece in enumerate(self.pieces):
            if piece:
                self.by_text.setdefault(piece, []).append(i)
        self.sorted_pieces = sorted((p, i) for i, p in enumerate(self.pieces) if p)
        self.longest = max(len(p) for p in self.by_text) if self.by_text else 0
        self._cache: dict[str, list[int] | None] = {}

    def allowed(self, text: str) -> list[int] | None:
        """The ids that keep an answer whose text so far is ``text`` inside the openings, or None when the answer
        is free (it holds a whole opening, or its text has left every opening)."""
        if text in self._cache:
            return self._cache[text]
        at = bisect.bisect_right(self.openings, text)
        # no opening is a prefix of another (each ends its plan line), so a whole opening the text starts with is
        # the last one at or before it
        done = at > 0 and text.startswith(self.openings[at - 1])
        rests = []
        for opening in [] if done else self.openings[at:]:
            if not opening.startswith(text):
                break
            rests.append(opening[len(text):])
        if not rests:
            self._cache[text] = None
            return None
        ids: set[int] = set()
        for rest in rests:
            for k in range(1, min(len(rest), self.longest) + 1):
                ids.update(self.by_text.get(rest[:k], ()))
            # pieces that finish the opening and run on past it
            at = bisect.bisect_left(self.sorted_pieces, (rest, -1))
            while at < len(self.sorted_pieces) and self.sorted_pieces[at][0].startswith(rest):
                ids.add(self.sorted_pieces[at][1])
                at += 1
        out = sorted(ids)
        self._cache[text] = out
        return out

    def processor(self, prefixes: Sequence[str] | str = "") -> OpeningConstraint:
        """A fresh processor for one ``generate`` call: ``prefixes`` is the text each row's answer opens with before
        its first generated token (one string for every row, or one per row of the expanded batch)."""
        return OpeningConstraint(self, prefixes)


class OpeningConstraint(LogitsProcessor):
    """The per-call state: each row's answer text so far (its prefix and the pieces of its generated ids), and
    whether it is free. The first call fixes where generation starts (the batch's input length)."""

    def __init__(self, vocab: OpeningVocabulary, prefixes: Sequence[str] | str = "") -> None:
        self.vocab = vocab
        self.prefixes = prefixes
        self.start: int | None = None
        self.texts: list[str] = []
        self.free: list[bool] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        rows, length = input_ids.shape
        if self.start is None:
            self.start = length
            if isinstance(self.prefixes, str):
                self.texts = [self.prefixes] * rows
            elif len(self.prefixes) == rows:
                self.texts = list(self.prefixes)
            else:
                raise ValueError(f"constrained openings: {len(self.prefixes)} prefixes for {rows} rows")
            self.free = [False] * rows
        elif length > self.start:
            last = input_ids[:, -1].tolist()
            for row in range(rows):
                if not self.free[row]:
                    self.texts[row] += self.vocab.pieces[last[row]] if last[row] < len(self.vocab.pieces) else ""
        for row in range(rows):
            if self.free[row]:
                continue
            ids = self.vocab.allowed(self.texts[row])
            if ids is None:
                self.free[row] = True
                continue
            width = scores.shape[-1]  # a tokenizer may hold more ids than the model scores
            keep = torch.tensor([i for i in ids if i < width], dtype=torch.long, device=scores.device)
            kept = scores[row, keep]
            if not torch.isfinite(kept).any():  # top-k/top-p left none of them: leave the row as sampled
                continue
            masked = torch.full_like(scores[row], float("-inf"))
            masked[keep] = kept
            scores[row] = masked
        return scores
