"""The base of every params section: frozen, unknown keys forbidden (a typo is an error, not an ignored knob).

Test: ``pytest tests/test_config.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

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

REMOVED_BENCH_N = ("every kernel is timed at its problem's own n, the size its prompt asks for "
                   "(prepare.dgemm.train_sizes / eval_sizes)")


def refuse_removed(data: Any, section: str, removed: Mapping[str, str]) -> Any:
    """The body of a section's ``model_validator(mode="before")`` for keys it no longer has: a params.yaml that still
    sets one is refused with what replaced it, not with pydantic's bare "extra inputs are not permitted"."""
    if isinstance(data, Mapping):
        for key, why in removed.items():
            if key in data:
                raise ValueError(f"{section}.{key} is gone: {why}; delete it from params.yaml")
    return data
