"""Repetition measures of answers (hpcrl_core/textstats.py). Run: pytest tests/test_textstats.py"""

from __future__ import annotations

import pytest

from hpcrl_core.textstats import is_degenerate, repeated_ngram_share, words


def test_a_loop_repeats_almost_every_trigram() -> None:
    text = "The code " + "code " * 30
    assert repeated_ngram_share(text) > 0.9
    assert is_degenerate(text)


def test_ordinary_sentences_do_not_count_as_degenerate() -> None:
    text = ("The loop nest multiplies two matrices. Each thread owns a block of rows, so no two threads write "
            "the same element of C, and the reduction over k stays private to the thread.")
    assert repeated_ngram_share(text) == 0.0
    assert not is_degenerate(text)


def test_hand_counted_share() -> None:
    # trigrams: (a b c) (b c a) (c a b) (a b c): 4 grams, 3 distinct -> 1 - 3/4
    assert repeated_ngram_share("a b c a b c") == pytest.approx(0.25)
    assert repeated_ngram_share("A, b") == 0.0  # three tokens "a" "," "b": one trigram
    assert words("Yes.") == ["yes", "."]


def test_empty_and_short_texts() -> None:
    assert repeated_ngram_share("") == 0.0
    assert is_degenerate("")
    assert is_degenerate("  ...")  # punctuation only: no answer
    assert not is_degenerate("no")


def test_bad_n_is_refused() -> None:
    with pytest.raises(ValueError, match="n=0"):
        repeated_ngram_share("a b", n=0)
