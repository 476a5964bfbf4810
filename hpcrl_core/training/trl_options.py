"""Checks of a stage's ``trl`` passthrough: every key must be a field of the TRL config class, and not one the
stage's own params already own (a second way to set a knob would be ambiguous).

Test: ``pytest tests/training/test_sft.py tests/training/test_rl.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from hpcrl_core.errors import ConfigError


def check_passthrough(options: dict[str, Any], config_cls: type, section: str, owned: dict[str, str]) -> None:
    """Raise unless every key of ``options`` is an init field of ``config_cls`` and not in ``owned``.

    Args:
        options: the ``<section>.trl`` mapping from params.yaml.
        config_cls: TRL's config dataclass (SFTConfig, GRPOConfig).
        section: the params section, for messages (``sft``, ``rl_dgemm``).
        owned: field name -> where to set it instead.

    Raises:
        ConfigError: listing unknown names (with close matches) and names to set elsewhere.
    """
    fields = {f.name for f in dataclasses.fields(config_cls) if f.init}
    name = config_cls.__name__
    problems = [f"{section}.trl.{k}: not a field of {name} in trl {trl_version()}{_did_you_mean(k, fields)}; the "
                f"allowed names are {name}'s fields" for k in options if k not in fields]
    problems += [f"{section}.trl.{k}: owned by the {section} stage; set it through {owned[k]}"
                 for k in options if k in owned]
    if problems:
        raise ConfigError(f"{section}.trl: invalid {name} passthrough", problems)


def _did_you_mean(name: str, fields: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(fields), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def trl_version() -> str:
    import trl

    return str(trl.__version__)
