"""PPO's token-level maths (hpcrl_core/algorithms/ppo.py) against values worked out by hand.

Run: pytest tests/algorithms/test_ppo.py
"""

from __future__ import annotations

import math

import pytest
import torch

from hpcrl_core.algorithms import ppo

MASK = torch.tensor([[1.0, 1.0, 0.0]])  # two real tokens, one of padding


def test_token_rewards_put_the_score_on_the_last_real_token_and_the_kl_on_every_token() -> None:
    rewards = ppo.token_rewards(torch.tensor([1.0]), torch.tensor([[-1.0, -2.0, 0.0]]),
                                torch.tensor([[-1.5, -2.0, 7.0]]), MASK, kl_coef=0.1)
    assert rewards[0].tolist() == pytest.approx([-0.05, 1.0, 0.0])
    rows = ppo.token_rewards(torch.tensor([2.0, 3.0]), torch.zeros(2, 3), torch.zeros(2, 3),
                             torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]]), kl_coef=0.1)
    assert rows.tolist() == [[0.0, 0.0, 2.0], [3.0, 0.0, 0.0]]
    empty = ppo.token_rewards(torch.tensor([5.0]), torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), 0.1)
    assert empty.tolist() == [[0.0, 0.0]]  # no real token: nowhere to put the score


def test_gae_by_hand() -> None:
    rewards = torch.tensor([[-0.05, 1.0, 0.0]])
    values = torch.tensor([[0.5, 0.2, 9.0]])  # the padding's value is never read
    adv, ret = ppo.gae(rewards, values, MASK, gamma=1.0, lam=0.5)
    # t=1 (last real): delta = 1.0 - 0.2 = 0.8; t=0: delta = -0.05 + 0.2 - 0.5 = -0.35, A = -0.35 + 0.5 * 0.8
    assert adv[0].tolist() == pytest.approx([0.05, 0.8, 0.0])
    assert ret[0].tolist() == pytest.approx([0.55, 1.0, 0.0])


def test_gae_limits_monte_carlo_and_one_step() -> None:
    torch.manual_seed(0)
    rewards, values = torch.randn(3, 5), torch.randn(3, 5)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.float32)
    rewards = rewards * mask
    _, ret = ppo.gae(rewards, values, mask, gamma=1.0, lam=1.0)  # lam 1: returns are the sums of what follows
    tail_sums = torch.flip(torch.cumsum(torch.flip(rewards, [1]), 1), [1]) * mask
    assert torch.allclose(ret, tail_sums, atol=1e-6)
    adv, _ = ppo.gae(rewards, values, mask, gamma=0.9, lam=0.0)  # lam 0: one-step TD errors
    next_values = torch.cat([values[:, 1:] * mask[:, 1:], torch.zeros(3, 1)], dim=1)
    assert torch.allclose(adv, (rewards + 0.9 * next_values - values) * mask, atol=1e-6)


def test_whiten_over_the_real_tokens_only() -> None:
    out = ppo.whiten(torch.tensor([[1.0, 3.0, 100.0]]), MASK)
    assert out[0].tolist() == pytest.approx([-1.0, 1.0, 0.0], abs=1e-6)
    assert ppo.masked_mean(torch.tensor([[1.0, 3.0, 100.0]]), MASK).item() == pytest.approx(2.0)


def test_the_clipped_surrogate_and_its_clip_share() -> None:
    zero = torch.zeros(1, 3)
    loss, share = ppo.policy_loss(zero, zero, torch.tensor([[1.0, 3.0, 50.0]]), MASK, 0.2, 0.2)
    assert loss.item() == pytest.approx(-2.0) and share.item() == 0.0  # ratio 1: minus the mean advantage
    doubled = torch.full((1, 3), math.log(2.0))
    loss, share = ppo.policy_loss(doubled, zero, torch.tensor([[1.0, -1.0, 0.0]]), MASK, 0.2, 0.2)
    # A = 1: max(-2, -1.2) = -1.2 (clipped); A = -1: max(2, 1.2) = 2 (the ratio's rise is not clipped against it)
    assert loss.item() == pytest.approx((-1.2 + 2.0) / 2) and share.item() == pytest.approx(0.5)


def test_the_clipped_value_loss() -> None:
    values, old, returns = torch.ones(1, 3), torch.zeros(1, 3), torch.ones(1, 3)
    # unclipped error 0, but the value may move at most 0.2 from 0: 0.5 * (0.2 - 1)^2
    assert ppo.value_loss(values, old, returns, MASK, 0.2).item() == pytest.approx(0.32)
    assert ppo.value_loss(old, old, returns, MASK, 0.2).item() == pytest.approx(0.5)


def test_explained_variance() -> None:
    returns = torch.tensor([[1.0, 3.0, 0.0]])
    assert ppo.explained_variance(returns, returns, MASK) == pytest.approx(1.0)
    assert ppo.explained_variance(torch.full((1, 3), 2.0), returns, MASK) == pytest.approx(0.0)
    assert math.isnan(ppo.explained_variance(returns, torch.ones(1, 3), MASK))
