"""The text of one completion as TRL hands it to a reward: a plain string, or conversational messages.

Shared by every reward (``dgemm_gflops`` reads the kernel from it, the task rewards the answer), so that a string
and the same text as an assistant message always score the same.

Run: ``.venv/bin/python -c "from hpcrl_core.rewards.completions import completion_text as f; print(f('x'))"``.
Test: ``pytest tests/rewards/test_completions.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, or the assistant messages of a conversational completion.

    Args:
        completion: a string, or TRL's conversational form ``[{"role": "assistant", "content": ...}, ...]``
            (the assistant messages are joined by newlines; other roles are left out).

    Raises:
        TypeError: neither a string nor a list of messages.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and all(isinstance(m, Mapping) for m in completion):
        parts = [_content_text(m.get("content")) for m in completion if m.get("role", "assistant") == "assistant"]
        return "\n".join(p for p in parts if p)
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}: "
                    f"{str(completion)[:80]!r}")


def _content_text(content: Any) -> str:
    """A message's content: a string, or a list of parts of which the ``text`` ones count."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return str(content)
