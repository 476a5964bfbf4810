"""The reward ladder of Mikasa et al. (2026): a fixed penalty per failure class, a GFLOPS-based reward when the
kernel is correct. All values come from ``params.yaml`` (section ``reward``).

Correct-kernel modes (``value`` is multiplied by ``reward.scale``):
- ``gflops``: measured GFLOPS;
- ``relative``: GFLOPS / reference GFLOPS (numpy's DGEMM, the best shipped kernel, or the naive one, measured on
  the same node close in time), comparable across CPUs and robust to drift;
- ``log_speedup``: ln(GFLOPS / reference GFLOPS).

Test: ``pytest tests/rewards/test_ladder.py``.
"""

from __future__ import annotations

import math

from hpcrl_core.bench.result import BenchResult, Status
from hpcrl_core.config import RewardParams
from hpcrl_core.errors import ConfigError


def penalty(status: Status, params: RewardParams) -> float:
    """The ladder's value for a failure class."""
    if status is Status.OK:
        raise ValueError("ok has no penalty; use shape_reward")
    return float(getattr(params, status.value))


def needs_reference(params: RewardParams) -> bool:
    return params.mode in ("relative", "log_speedup")


def shape_reward(result: BenchResult, params: RewardParams, reference_gflops: float | None = None) -> float:
    """The reward of one benchmark result.

    Args:
        result: the engine's result.
        params: the ``reward`` section.
        reference_gflops: required for ``relative`` and ``log_speedup``.

    Raises:
        ConfigError: a relative mode without a positive reference figure.
    """
    if not result.ok:
        return penalty(result.status, params)
    gflops = float(result.gflops or 0.0)
    if params.mode == "gflops":
        return params.scale * gflops
    if not reference_gflops or reference_gflops <= 0:
        raise ConfigError(f"reward.mode {params.mode!r} needs a positive reference GFLOPS, got {reference_gflops!r}; "
                          "measure the reference (hpcrl bench --reference) or use mode 'gflops'")
    ratio = gflops / reference_gflops
    if params.mode == "relative":
        return params.scale * ratio
    return params.scale * math.log(max(ratio, 1e-12))
