"""The base of every params section: frozen, unknown keys forbidden (a typo is an error, not an ignored knob).

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

# The data families (hpcrl_core/data/ builds them; sft.families and the reports name them).
FAMILIES: tuple[str, ...] = ("dgemm", "race_c", "race_fortran", "mlperf", "plp")


class Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def distinct_seeds(v: tuple[int, ...]) -> tuple[int, ...]:
    """The check of a comparison's ``seeds``: at least one, distinct, non-negative (a field validator's body)."""
    if not v or len(set(v)) != len(v) or any(s < 0 for s in v):
        raise ValueError(f"seeds must be distinct non-negative integers, at least one; got {list(v)}")
    return v


# a comparison's seeds field: checked by distinct_seeds wherever it is declared
Seeds = Annotated[tuple[int, ...], AfterValidator(distinct_seeds)]
