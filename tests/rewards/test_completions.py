"""Tests of reading a completion's text (strings and TRL's conversational form).

Run: pytest tests/rewards/test_completions.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.rewards.completions import completion_text


def test_completion_text_forms() -> None:
    assert completion_text("x") == "x"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
                            {"role": "tool", "content": "ignored"}, {"role": "assistant", "content": "b"}]) == "a\nb"
    with pytest.raises(TypeError, match="string or a list of chat messages"):
        completion_text(42)
