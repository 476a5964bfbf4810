"""The base of every params section: frozen, unknown keys forbidden (a typo is an error, not an ignored knob).

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
