"""The promotion rule: whether a newly registered model (the challenger) replaces the champion; plain Python.

The register flow reads the evaluation report (``read_eval_report``), logs its numbers as the version's metrics
(``report_metrics``), and moves the registry alias ``champion`` when ``decide_promotion`` says so. The policy (the
metrics compared, the slack) is the ``registry`` section of params.yaml (``RegistryParams``); MLflow is
``hpcrl_core/tracking.py``'s business, not this module's.

Test: ``pytest tests/evaluation/test_promotion.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcrl_core.config import RegistryParams
from hpcrl_core.errors import DataError

# 1e-9: a drop of exactly the slack is allowed, whatever the float rounding of the subtraction
_ROUNDING = 1e-9


@dataclass(frozen=True)
class Decision:
    """The outcome of ``decide_promotion``.

    Attributes:
        promote: whether the challenger becomes champion.
        reason: one line saying why, with the compared values (for the run log).
    """

    promote: bool
    reason: str


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def report_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """The report's numbers as flat metric names (``rl.gflops_median``, ``sft.status_counts.ok``); ``meta`` and
    non-numbers are left out."""
    flat = _flatten({k: v for k, v in report.items() if k != "meta"})
    return {k: float(v) for k, v in flat.items() if _is_number(v)}


def read_eval_report(path: Path, policy: RegistryParams) -> dict[str, Any]:
    """Read an evaluation report (``reports/eval_dgemm.json``) and check it holds the metrics ``policy`` compares.

    Returns:
        The report as written: ``{"sft": {...}, "rl": {...}, "meta": {...}}``.

    Raises:
        DataError: the file is missing or not JSON, lacks the block of a compared metric (``rl``), or the metric
            is not a number there.
    """
    fix = "run the DGEMM evaluation first (`dvc repro evaluate_dgemm`) or pass --report"
    if not path.is_file():
        raise DataError(f"report: {path} does not exist; {fix}")
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DataError(f"report: {path} is not JSON ({e}); {fix}") from e
    keys = tuple(k for k in (policy.metric, policy.verified_metric) if k is not None)
    for block in dict.fromkeys(k.split(".", 1)[0] for k in keys):
        if not isinstance(report, dict) or not isinstance(report.get(block), dict):
            found = sorted(report) if isinstance(report, dict) else type(report).__name__
            raise DataError(f"report: {path} has no {block!r} block (found {found}); it must hold the held-out "
                            f"metrics promotion compares ({', '.join(keys)}); {fix}")
    metrics = report_metrics(report)
    missing = [k for k in keys if k not in metrics]
    if missing:
        raise DataError(f"report: {path} lacks numeric {', '.join(missing)}; {fix}")
    return report


def decide_promotion(challenger: Mapping[str, float], champion: Mapping[str, float] | None,
                     policy: RegistryParams) -> Decision:
    """Whether a challenger should replace the champion, judged on held-out metrics.

    The challenger wins when its ``policy.metric`` is strictly higher than the champion's AND its
    ``policy.verified_metric`` is not lower than the champion's by more than ``policy.verified_slack``: faster
    kernels may not be bought with many more wrong ones. With no champion, any challenger wins (the first version
    becomes champion).

    Args:
        challenger: the challenger's flat metrics (``report_metrics``; ``rl.gflops_median`` -> value).
        champion: the champion's flat metrics, or ``None`` when there is no champion.
        policy: the ``registry`` section of params.yaml.

    Raises:
        DataError: either side lacks one of the two metrics.
    """
    if champion is None:
        return Decision(True, "no champion yet: the first version becomes champion")
    metric, verified = policy.metric, policy.verified_metric
    for side, metrics in (("challenger", challenger), ("champion", champion)):
        missing = [k for k in (metric, verified) if k is not None and k not in metrics]
        if missing:
            raise DataError(f"cannot compare models: the {side} has no {', '.join(missing)} metric; register "
                            "versions with this flow (it logs them), or set the champion alias by hand")
    new, old = challenger[metric], champion[metric]
    if not new > old:
        return Decision(False, f"{metric} {new:.4g} is not above the champion's {old:.4g}")
    if verified is None:
        return Decision(True, f"{metric} {new:.4g} beats the champion's {old:.4g}")
    new_v, old_v = challenger[verified], champion[verified]
    if new_v < old_v - policy.verified_slack - _ROUNDING:
        return Decision(False, f"{metric} {new:.4g} beats the champion's {old:.4g}, but {verified} {new_v:.4g} is "
                               f"more than {policy.verified_slack:g} below the champion's {old_v:.4g}")
    return Decision(True, f"{metric} {new:.4g} beats the champion's {old:.4g} and {verified} {new_v:.4g} is within "
                          f"{policy.verified_slack:g} of the champion's {old_v:.4g}")
