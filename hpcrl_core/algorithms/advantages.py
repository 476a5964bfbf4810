"""Advantage estimators chosen by name (``rl_hargo.estimator``): ``ADVANTAGES`` maps a name to a pure tensor function.

Every estimator has one signature, so the trainer calls any of them the same way::

    out = ADVANTAGES.get("hargo")(rewards, group_size=G, ref_logps=ref_logps, ema=None, alpha=0.3, rho=0.9)
    out.advantages  # (B*G,) advantage of each response (HARGO: the modulated A_mod)
    out.weights     # (B*G,) loss weight of each response; each group's weights sum to 1
    out.ema         # the updated EMA baseline g (a float), or the ``ema`` passed in for estimators without one

Inputs are 1-D float tensors of length B*G with the G responses of a group contiguous (response j of group b at
index ``b*G + j``), which is how TRL's GRPOTrainer lays out a generation batch. The loss the trainer builds from
them is ``sum_i w_i L_i`` per group (``hpcrl_core/training/hargo.py``); uniform weights 1/G give GRPO's mean.

The estimators (HARGO: Li & Tian 2026, arXiv 2607.28301; formulas also in ``../shared/ARCHITECTURE.md``):

- ``grpo``: ``A_i = (r_i - mean r) / (std r + eps)`` per group; ``w_i = 1/G``.
- ``dr_grpo`` (Dr. GRPO): ``A_i = r_i - mean r`` (no std scaling); ``w_i = 1/G``.
- ``hargo``: A as ``grpo``; EMA baseline ``g <- rho g + (1 - rho) mean(ref_logps)`` over the whole batch, updated
  *before* the confidence is computed and starting at the batch mean when ``ema`` is None; ``c_i = sigmoid(ref_logp_i
  - g)``; ``A_mod_i = A_i (1 + alpha c_i)``; ``d_i = |A_mod_i| / max_j |A_mod_j|`` in the group; ``w_i = d_i / sum_j
  d_j``, uniform 1/G when the group carries no contrast (see below).
- ``hargo_b1`` (ablation B1, "w proportional to d, no modulation"): ``A_mod = A`` (no confidence at all), ``d`` and
  ``w`` from ``|A|`` as in ``hargo``; the EMA is not used and passes through unchanged.
- ``hargo_b2`` (ablation B2, "weights from confidence only"): ``A_mod = A (1 + alpha c)`` as in ``hargo``, but
  ``w_i = c_i / sum_j c_j`` instead of the magnitude weights.

Choices the paper leaves open, stated here:

- ``std`` is the unbiased sample standard deviation of the group (Bessel's correction, divisor G - 1) and ``eps`` is
  1e-4, both as in TRL's GRPOTrainer, so ``grpo`` equals TRL's ``scale_rewards="group"`` advantages.
- A group "carries no contrast" when ``max_j |A_mod_j| <= 1e-8`` (all rewards equal up to float noise); its weights
  are uniform 1/G. Otherwise ``sum_j d_j >= 1`` (the largest d is 1), so the division is safe; the max
  normalisation cancels in ``w`` and is kept only because ``d`` is the paper's logged quantity.
- ``c`` lies in (0, 1) and ``1 + alpha c > 0`` for ``alpha >= 0``, so modulation never flips an advantage's sign.
- ``ref_logps`` are *mean* token log-probabilities of each response under the frozen reference (SFT) model (the
  trainer averages over completion tokens), so long and short answers are on one scale.
- A NaN or infinite reward or reference log-prob is refused (ValueError): a reward that could not be computed must
  not turn into a silent advantage.

Test: ``pytest tests/algorithms/test_advantages.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

from hpcrl_core.errors import ConfigError

STD_EPS = 1e-4  # TRL's GRPOTrainer adds the same to the group std
NO_CONTRAST = 1e-8  # max |A_mod| in a group at or below this: the group's weights are uniform


@dataclass(frozen=True)
class Advantages:
    """What an estimator returns; every tensor has shape (B*G,), groups contiguous.

    Attributes:
        advantages: the advantage each response's surrogate uses (HARGO and B2: the modulated ``A_mod``).
        weights: per-response loss weights, non-negative, each group summing to 1.
        ema: the EMA baseline after this batch (HARGO, B2), or the one passed in (GRPO, Dr. GRPO, B1).
        confidence: ``c_i`` for estimators that compute it, else None (for logging).
    """

    advantages: torch.Tensor
    weights: torch.Tensor
    ema: float | None
    confidence: torch.Tensor | None = None


class Estimator(Protocol):
    def __call__(self, rewards: torch.Tensor, *, group_size: int, ref_logps: torch.Tensor | None = None,
                 ema: float | None = None, alpha: float = 0.3, rho: float = 0.9) -> Advantages: ...


class _Registry:
    """Name -> estimator; ``get`` raises a ConfigError that lists the known names."""

    def __init__(self) -> None:
        self._items: dict[str, Estimator] = {}

    def register(self, name: str) -> Callable[[Estimator], Estimator]:
        def add(fn: Estimator) -> Estimator:
            if name in self._items:
                raise ValueError(f"advantage estimator {name!r} is registered twice; give the new one another name")
            self._items[name] = fn
            return fn
        return add

    def get(self, name: str) -> Estimator:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items))
            raise ConfigError(f"unknown advantage estimator {name!r}; known: {known}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._items))

    def __contains__(self, name: object) -> bool:
        return name in self._items


ADVANTAGES = _Registry()


def _groups(values: torch.Tensor, group_size: int, what: str) -> torch.Tensor:
    """``values`` (B*G,) viewed as (B, G) in float64, after checking shape and finiteness."""
    if group_size < 1:
        raise ValueError(f"group_size={group_size}; it must be >= 1 (the G responses sampled per prompt)")
    if values.dim() != 1 or values.numel() == 0 or values.numel() % group_size:
        raise ValueError(f"{what}: expected a non-empty 1-D tensor whose length is a multiple of group_size="
                         f"{group_size}; got shape {tuple(values.shape)}")
    if not torch.isfinite(values).all():
        bad = int((~torch.isfinite(values)).nonzero()[0])
        raise ValueError(f"{what}[{bad}] is {values[bad].item()}; every value must be finite (a reward that could "
                         "not be computed must fail, not become an advantage)")
    return values.detach().to(torch.float64).view(-1, group_size)


def group_normalized(rewards: torch.Tensor, group_size: int, scale: bool = True) -> torch.Tensor:
    """``(r - mean) / (std + eps)`` per group (``scale``), or ``r - mean``; shape (B, G), float64."""
    r = _groups(rewards, group_size, "rewards")
    centred = r - r.mean(dim=1, keepdim=True)
    if not scale:
        return centred
    std = r.std(dim=1, keepdim=True, correction=1) if group_size > 1 else torch.zeros_like(centred[:, :1])
    return centred / (std + STD_EPS)


def magnitude_weights(a_mod: torch.Tensor) -> torch.Tensor:
    """``w = d / sum d`` with ``d = |A_mod| / max |A_mod|`` per group; uniform where a group has no contrast.

    Args:
        a_mod: (B, G) advantages.

    Returns:
        (B, G) weights, each row summing to 1.
    """
    size = a_mod.abs()
    peak = size.max(dim=1, keepdim=True).values
    flat = peak <= NO_CONTRAST
    d = size / torch.where(flat, torch.ones_like(peak), peak)
    w = d / d.sum(dim=1, keepdim=True).clamp(min=1.0)  # sum d >= 1 where the group has contrast
    return torch.where(flat, torch.full_like(w, 1.0 / a_mod.shape[1]), w)


def confidence(ref_logps: torch.Tensor | None, group_size: int, ema: float | None,
               rho: float) -> tuple[torch.Tensor, float]:
    """``c = sigmoid(ref_logp - g)`` after the EMA update ``g <- rho g + (1 - rho) mean(ref_logps)`` (batch mean).

    Returns:
        ``(c, g)``: c of shape (B, G) and the updated baseline.

    Raises:
        ValueError: ``ref_logps`` missing (HARGO needs the reference model's log-probs: beta > 0), misshapen or not
            finite; ``rho`` outside [0, 1).
    """
    if ref_logps is None:
        raise ValueError("ref_logps is None: HARGO's confidence needs the mean token log-prob of every response "
                         "under the frozen reference model (TRL computes it when beta > 0)")
    if not 0.0 <= rho < 1.0:
        raise ValueError(f"rho={rho}; it must lie in [0, 1)")
    lp = _groups(ref_logps, group_size, "ref_logps")
    batch_mean = float(lp.mean())
    g = batch_mean if ema is None else rho * float(ema) + (1.0 - rho) * batch_mean
    return torch.sigmoid(lp - g), g


def _check_alpha(alpha: float) -> None:
    if alpha < 0:
        raise ValueError(f"alpha={alpha}; it must be >= 0 (a negative alpha could flip an advantage's sign)")


def _out(rewards: torch.Tensor, a: torch.Tensor, w: torch.Tensor, ema: float | None,
         c: torch.Tensor | None = None) -> Advantages:
    dtype = rewards.dtype if rewards.is_floating_point() else torch.float32

    def flat(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1).to(device=rewards.device, dtype=dtype)

    return Advantages(flat(a), flat(w), ema, None if c is None else flat(c))


def _uniform(a: torch.Tensor) -> torch.Tensor:
    return torch.full_like(a, 1.0 / a.shape[1])


@ADVANTAGES.register("grpo")
def grpo(rewards: torch.Tensor, *, group_size: int, ref_logps: torch.Tensor | None = None, ema: float | None = None,
         alpha: float = 0.3, rho: float = 0.9) -> Advantages:
    """GRPO: group-normalised advantages, uniform weights 1/G (``ref_logps``, ``alpha``, ``rho`` unused)."""
    a = group_normalized(rewards, group_size)
    return _out(rewards, a, _uniform(a), ema)


@ADVANTAGES.register("dr_grpo")
def dr_grpo(rewards: torch.Tensor, *, group_size: int, ref_logps: torch.Tensor | None = None,
            ema: float | None = None, alpha: float = 0.3, rho: float = 0.9) -> Advantages:
    """Dr. GRPO: ``r - mean`` without std scaling, uniform weights 1/G."""
    a = group_normalized(rewards, group_size, scale=False)
    return _out(rewards, a, _uniform(a), ema)


@ADVANTAGES.register("hargo")
def hargo(rewards: torch.Tensor, *, group_size: int, ref_logps: torch.Tensor | None = None,
          ema: float | None = None, alpha: float = 0.3, rho: float = 0.9) -> Advantages:
    """HARGO: confidence-modulated advantages and magnitude weights (module docstring).

    Args:
        rewards: (B*G,) rewards, groups contiguous.
        group_size: G.
        ref_logps: (B*G,) mean token log-prob of each response under the frozen reference model.
        ema: the baseline g from the previous batch, or None for the first batch (g starts at the batch mean).
        alpha: modulation strength, >= 0.
        rho: EMA decay in [0, 1).

    Returns:
        ``Advantages`` with ``A_mod``, the weights ``w``, the updated ``ema`` and ``c``.
    """
    _check_alpha(alpha)
    a = group_normalized(rewards, group_size)
    c, g = confidence(ref_logps, group_size, ema, rho)
    a_mod = a * (1.0 + alpha * c)
    return _out(rewards, a_mod, magnitude_weights(a_mod), g, c)


@ADVANTAGES.register("hargo_b1")
def hargo_b1(rewards: torch.Tensor, *, group_size: int, ref_logps: torch.Tensor | None = None,
             ema: float | None = None, alpha: float = 0.3, rho: float = 0.9) -> Advantages:
    """Ablation B1: weights proportional to ``|A|`` and no confidence modulation (``ref_logps`` unused)."""
    a = group_normalized(rewards, group_size)
    return _out(rewards, a, magnitude_weights(a), ema)


@ADVANTAGES.register("hargo_b2")
def hargo_b2(rewards: torch.Tensor, *, group_size: int, ref_logps: torch.Tensor | None = None,
             ema: float | None = None, alpha: float = 0.3, rho: float = 0.9) -> Advantages:
    """Ablation B2: HARGO's modulated advantages, weights ``c / sum c`` from the confidence alone."""
    _check_alpha(alpha)
    a = group_normalized(rewards, group_size)
    c, g = confidence(ref_logps, group_size, ema, rho)
    return _out(rewards, a * (1.0 + alpha * c), c / c.sum(dim=1, keepdim=True), g, c)
