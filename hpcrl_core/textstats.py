"""Plain statistics of answer texts shared by rewards and evaluation: word n-gram repetition and degeneracy.

A tiny policy decoding greedily falls into loops ("The code code code code ..."); the PLP reward's non-repetition
bonus and the evaluation's "degenerate share" both read the same measure, defined once here so that what RL is
rewarded for and what the report counts cannot drift apart.

Run: ``.venv/bin/python -c "from hpcrl_core.textstats import repeated_ngram_share as f; print(f('a a a a a'))"``.
Test: ``pytest tests/test_textstats.py``.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\w+|[^\w\s]")

# Answers whose repeated share of word trigrams exceeds this are degenerate (loops, not language). Ordinary English
# of a few sentences repeats well under 0.1 of its trigrams; "the code code code ..." repeats nearly all of them.
DEGENERATE_SHARE = 0.3
NGRAM = 3


def words(text: str) -> list[str]:
    """The text's word and punctuation tokens, case-folded."""
    return _WORD.findall(text.casefold())


def repeated_ngram_share(text: str, n: int = NGRAM) -> float:
    """Share of the text's word n-grams that repeat an earlier one: ``1 - distinct / total``.

    Args:
        text: an answer.
        n: n-gram length in word tokens (``words``), >= 1.

    Returns:
        A value in [0, 1): 0.0 when no n-gram repeats, or when the text has fewer than ``n`` tokens.

    Raises:
        ValueError: ``n`` below 1.
    """
    if n < 1:
        raise ValueError(f"repeated_ngram_share: n={n}; it must be >= 1")
    tokens = words(text)
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    if not grams:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def is_degenerate(text: str, n: int = NGRAM, threshold: float = DEGENERATE_SHARE) -> bool:
    """Whether an answer is empty or loops: no letter or digit at all, or a repeated n-gram share above
    ``threshold``."""
    return not any(ch.isalnum() for ch in text) or repeated_ngram_share(text, n) > threshold
