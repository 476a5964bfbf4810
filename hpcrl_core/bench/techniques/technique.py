"""The optimisation techniques the DGEMM technique detector reports, and parsing of their names.

The detection rules that define each technique are in the ``hpcrl_core.bench.techniques`` package docstring.

Test: ``python3 -m pytest tests/bench/test_techniques.py -q``.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum


class Technique(StrEnum):
    """An optimisation technique a kernel can use (see the package docstring for the detection rules)."""

    LOOP_REORDER = "loop_reorder"
    CACHE_BLOCKING = "cache_blocking"
    REGISTER_BLOCKING = "register_blocking"
    OPENMP = "openmp"
    SIMD = "simd"


ALL_TECHNIQUES: tuple[Technique, ...] = tuple(Technique)


def parse_techniques(names: Iterable[str]) -> frozenset[Technique]:
    """Turn technique names into ``Technique`` values.

    Args:
        names: technique names such as ``"simd"`` (surrounding blanks ignored, case-insensitive).

    Returns:
        The techniques named.

    Raises:
        ValueError: a name is not a known technique; the message names it and lists the known ones.
    """
    out: set[Technique] = set()
    for name in names:
        key = str(name).strip().lower()
        try:
            out.add(Technique(key))
        except ValueError:
            known = ", ".join(t.value for t in ALL_TECHNIQUES)
            raise ValueError(f"unknown technique {name!r}; known techniques: {known}") from None
    return frozenset(out)
