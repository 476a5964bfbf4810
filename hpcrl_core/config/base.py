"""The base of every params section: frozen, unknown keys forbidden (a typo is an error, not an ignored knob).

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# The data families (hpcrl_core/data/ builds them; sft.families and the reports name them).
FAMILIES: tuple[str, ...] = ("dgemm", "race_c", "race_fortran", "mlperf", "plp")


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
