"""One source of defaults: the schema in hpcrl_core/config/ holds every default; params.yaml spells the same
values out for users to read and edit, and this test proves they agree (docs/config.md says why).

Run: pytest tests/test_defaults.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hpcrl_core.config import Params, load_params

ROOT = Path(__file__).resolve().parents[1]


def _differences(a: Any, b: Any, path: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return [d for k in sorted(set(a) | set(b)) for d in _differences(a.get(k), b.get(k), f"{path}.{k}")]
    return [] if a == b else [f"{path.lstrip('.')}: params.yaml has {a!r}, the schema default is {b!r}"]


def test_params_yaml_equals_the_schema_defaults() -> None:
    shipped = load_params(ROOT / "params.yaml").model_dump()
    differences = _differences(shipped, Params().model_dump())
    assert not differences, "change both or neither:\n" + "\n".join(differences)


def test_the_comparison_sees_a_changed_value() -> None:
    changed = Params().model_copy(update={"bench": Params().bench.model_copy(update={"n": 256})}).model_dump()
    assert _differences(changed, Params().model_dump()) == ["bench.n: params.yaml has 256, the schema default is 512"]
