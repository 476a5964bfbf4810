"""Advantage estimators (hpcrl_core/algorithms/advantages.py): hand-computed HARGO values, GRPO equivalences, the
invariants every estimator keeps. Run: pytest tests/algorithms/test_advantages.py"""

from __future__ import annotations

import math

import pytest
import torch

from hpcrl_core.algorithms.advantages import ADVANTAGES, STD_EPS
from hpcrl_core.config import ESTIMATORS
from hpcrl_core.errors import ConfigError

T = torch.tensor


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _hargo_by_hand(rewards: list[float], lps: list[float], g_prev: float | None, alpha: float, rho: float,
                   group: int) -> tuple[list[float], list[float], float]:
    """HARGO in plain floats, written from the formula, independent of the tensor code."""
    mean_lp = sum(lps) / len(lps)
    g = mean_lp if g_prev is None else rho * g_prev + (1 - rho) * mean_lp
    a_mod: list[float] = []
    weights: list[float] = []
    for start in range(0, len(rewards), group):
        r = rewards[start:start + group]
        mu = sum(r) / group
        std = math.sqrt(sum((x - mu) ** 2 for x in r) / (group - 1))
        a = [(x - mu) / (std + STD_EPS) for x in r]
        m = [ai * (1 + alpha * _sigmoid(lp - g)) for ai, lp in zip(a, lps[start:start + group], strict=True)]
        peak = max(abs(x) for x in m)
        if peak <= 1e-8:
            w = [1 / group] * group
        else:
            d = [abs(x) / peak for x in m]
            w = [x / sum(d) for x in d]
        a_mod += m
        weights += w
    return a_mod, weights, g


def test_every_configurable_estimator_is_registered() -> None:
    assert ADVANTAGES.names() == tuple(sorted(ESTIMATORS))


def test_one_response_carrying_all_the_contrast_g4() -> None:
    # r = [1, 0, 0, 0]: mean 0.25, sample std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5; equal ref log-probs give
    # c = sigmoid(0) = 0.5 for all, so A_mod = 1.15 A and d = [1, 1/3, 1/3, 1/3] -> w = [1/2, 1/6, 1/6, 1/6].
    out = ADVANTAGES.get("hargo")(T([1.0, 0.0, 0.0, 0.0]), group_size=4, ref_logps=T([-1.0] * 4), ema=None,
                                  alpha=0.3, rho=0.9)
    a = [0.75 / (0.5 + STD_EPS), -0.25 / (0.5 + STD_EPS), -0.25 / (0.5 + STD_EPS), -0.25 / (0.5 + STD_EPS)]
    assert out.advantages.tolist() == pytest.approx([x * 1.15 for x in a], rel=1e-6)
    assert out.weights.tolist() == pytest.approx([0.5, 1 / 6, 1 / 6, 1 / 6], rel=1e-6)
    assert out.ema == pytest.approx(-1.0)
    assert out.confidence is not None and out.confidence.tolist() == pytest.approx([0.5] * 4)


def test_all_equal_rewards_get_zero_advantage_and_uniform_weights() -> None:
    for name in ("hargo", "hargo_b1", "grpo", "dr_grpo"):
        out = ADVANTAGES.get(name)(T([0.7] * 8), group_size=4, ref_logps=T([-0.5, -1, -2, -3] * 2))
        assert out.advantages.abs().max().item() == 0.0, name
        assert out.weights.tolist() == pytest.approx([0.25] * 8), name


@pytest.mark.parametrize("group", [4, 8])
def test_hargo_matches_the_formula_by_hand(group: int) -> None:
    gen = torch.Generator().manual_seed(group)
    rewards = torch.rand(3 * group, generator=gen).round(decimals=1)
    rewards[:group] = 0.3  # one group without contrast
    lps = -3 * torch.rand(3 * group, generator=gen)
    out = ADVANTAGES.get("hargo")(rewards, group_size=group, ref_logps=lps, ema=-1.25, alpha=0.3, rho=0.9)
    a_mod, weights, g = _hargo_by_hand(rewards.tolist(), lps.tolist(), -1.25, 0.3, 0.9, group)
    assert out.advantages.tolist() == pytest.approx(a_mod, rel=1e-5, abs=1e-7)
    assert out.weights.tolist() == pytest.approx(weights, rel=1e-5, abs=1e-7)
    assert out.ema == pytest.approx(g)


def test_ema_starts_at_the_batch_mean_and_updates_before_the_confidence() -> None:
    lps = T([-1.0, -2.0, -1.0, -2.0])  # batch mean -1.5
    first = ADVANTAGES.get("hargo")(T([1.0, 0.0, 1.0, 0.0]), group_size=2, ref_logps=lps, ema=None)
    assert first.ema == pytest.approx(-1.5)
    second = ADVANTAGES.get("hargo")(T([1.0, 0.0, 1.0, 0.0]), group_size=2, ref_logps=lps, ema=-3.0, rho=0.9)
    g = 0.9 * -3.0 + 0.1 * -1.5
    assert second.ema == pytest.approx(g)
    assert second.confidence is not None
    assert second.confidence.tolist() == pytest.approx([_sigmoid(-1 - g), _sigmoid(-2 - g)] * 2)


def test_grpo_equals_hargo_at_alpha_zero_and_trls_group_scaling() -> None:
    gen = torch.Generator().manual_seed(1)
    rewards, lps = torch.randn(16, generator=gen), torch.randn(16, generator=gen)
    g = ADVANTAGES.get("grpo")(rewards, group_size=4)
    h = ADVANTAGES.get("hargo")(rewards, group_size=4, ref_logps=lps, alpha=0.0)
    assert torch.allclose(g.advantages, h.advantages, atol=1e-6)
    assert g.weights.tolist() == pytest.approx([0.25] * 16)
    grouped = rewards.view(-1, 4)  # TRL 1.16, scale_rewards="group": (r - mean) / (unbiased std + 1e-4)
    trl = (grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)
    assert torch.allclose(g.advantages, trl.reshape(-1), atol=1e-6)
    dr = ADVANTAGES.get("dr_grpo")(rewards, group_size=4)
    assert torch.allclose(dr.advantages, (grouped - grouped.mean(1, keepdim=True)).reshape(-1), atol=1e-6)


@pytest.mark.parametrize("name", ESTIMATORS)
def test_invariants_sign_weights_shapes(name: str) -> None:
    gen = torch.Generator().manual_seed(7)
    for trial in range(20):
        group = 2 + trial % 7
        rewards = torch.randint(0, 3, (5 * group,), generator=gen).float() * torch.rand(1, generator=gen)
        lps = -5 * torch.rand(5 * group, generator=gen)
        out = ADVANTAGES.get(name)(rewards, group_size=group, ref_logps=lps, ema=-2.0, alpha=5.0, rho=0.5)
        plain = ADVANTAGES.get("dr_grpo")(rewards, group_size=group)
        assert out.advantages.shape == out.weights.shape == rewards.shape
        assert torch.equal(torch.sign(out.advantages), torch.sign(plain.advantages)), "an advantage's sign flipped"
        assert (out.weights >= 0).all()
        assert torch.allclose(out.weights.view(-1, group).sum(1), torch.ones(5, dtype=out.weights.dtype))


def test_b1_has_no_modulation_and_b2_weights_follow_confidence() -> None:
    rewards, lps = T([1.0, 0.0, 0.5, 0.5]), T([-0.1, -3.0, -1.0, -1.0])
    b1 = ADVANTAGES.get("hargo_b1")(rewards, group_size=4, ref_logps=lps, ema=7.0)
    assert torch.allclose(b1.advantages, ADVANTAGES.get("grpo")(rewards, group_size=4).advantages)
    assert b1.ema == 7.0  # B1 does not use the baseline: it passes through
    b2 = ADVANTAGES.get("hargo_b2")(rewards, group_size=4, ref_logps=lps, ema=None)
    h = ADVANTAGES.get("hargo")(rewards, group_size=4, ref_logps=lps, ema=None)
    assert torch.allclose(b2.advantages, h.advantages)
    assert b2.confidence is not None
    assert torch.allclose(b2.weights, b2.confidence / b2.confidence.sum())
    assert b2.weights[0] > b2.weights[2] > b2.weights[1]  # the most confident response weighs most


def test_bad_inputs_are_refused_with_the_value() -> None:
    with pytest.raises(ValueError, match=r"rewards\[2\] is nan"):
        ADVANTAGES.get("grpo")(T([1.0, 0.0, float("nan"), 0.0]), group_size=2)
    with pytest.raises(ValueError, match="multiple of group_size=4"):
        ADVANTAGES.get("grpo")(T([1.0, 0.0, 1.0]), group_size=4)
    with pytest.raises(ValueError, match="beta > 0"):
        ADVANTAGES.get("hargo")(T([1.0, 0.0]), group_size=2)
    with pytest.raises(ValueError, match="alpha=-1"):
        ADVANTAGES.get("hargo")(T([1.0, 0.0]), group_size=2, ref_logps=T([0.0, 0.0]), alpha=-1)
    with pytest.raises(ConfigError, match="known: dr_grpo, grpo, hargo"):
        ADVANTAGES.get("ppo")
