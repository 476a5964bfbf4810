"""Choices that depend only on names, never on list positions: one item more or less changes nothing else.

A seeded ``random.Random`` draws in sequence, so adding or removing one candidate (a kernel that verified on one
node and not on another, a record dropped as a duplicate) shifts every later draw. ``stable_unit`` instead gives each
(seed, name, ...) tuple its own number, so every choice made from it is local to the items it names.

Test: ``pytest tests/data/test_stable.py``.
"""

from __future__ import annotations

import hashlib
import math


def stable_unit(*parts: object) -> float:
    """A number in the open interval (0, 1) fixed by ``parts`` (their ``str``), uniform over distinct inputs."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2.0**64


def stable_index(count: int, *parts: object) -> int:
    """An index in ``range(count)`` fixed by ``parts``, uniform over distinct inputs (``stable_unit`` scaled).

    Raises:
        ValueError: ``count`` is below 1.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1 to pick an index, received {count!r}")
    return min(int(stable_unit(*parts) * count), count - 1)


def weighted_key(weight: float, *parts: object) -> float:
    """A sort key whose maximum over candidates picks one with probability proportional to ``weight``.

    The key is ``log(u) / weight`` with ``u = stable_unit(*parts)`` (Efraimidis and Spirakis' weighted sampling by
    keys ``u ** (1 / weight)``, in logs). A small change of one weight moves only that candidate's key a little, so
    the winner changes only where two keys were already close.

    Raises:
        ValueError: ``weight`` is not a positive finite number.
    """
    if not (weight > 0 and math.isfinite(weight)):
        raise ValueError(f"weight must be a positive finite number, received {weight!r}")
    return math.log(stable_unit(*parts)) / weight
