"""PPO's token-level maths for the HARGO comparison's PPO baseline (``hpcrl_core/training/ppo.py``): per-token rewards,
generalised advantage estimation, whitening and the two clipped losses. Pure tensor functions.

Shapes: every tensor is ``(B, T)`` over B completions of up to T tokens, right-padded; ``mask`` is 1 on a
completion's real tokens (its end-of-sequence token included) and 0 after them. ``values[:, t]`` is the value of the
state before token t is sampled.

Choices made here (the usual RLHF-PPO reading; the HARGO paper does not spell its PPO out):

- the task reward arrives once per completion, at its last real token; every token also pays
  ``-kl_coef * (logp_t - ref_logp_t)`` (the sampled token's log-ratio to the frozen SFT start, the k1 estimator);
- GAE with ``gamma`` and ``lam``; the state after the last real token is terminal (value 0);
- returns = advantages + values (the value head's regression target);
- whitening: mean and population variance over the masked tokens of the batch, ``eps`` 1e-8 under the root.

Test: ``pytest tests/algorithms/test_ppo.py``.
"""

from __future__ import annotations

import torch


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """The index of each row's last real token, ``(B,)`` (0 for a row with none)."""
    return (mask.sum(dim=1).long() - 1).clamp(min=0)


def token_rewards(scores: torch.Tensor, logps: torch.Tensor, ref_logps: torch.Tensor, mask: torch.Tensor,
                  kl_coef: float) -> torch.Tensor:
    """Per-token rewards ``(B, T)``: ``-kl_coef * (logps - ref_logps)`` on real tokens, plus ``scores[b]`` (``(B,)``)
    on row b's last real token; 0 on padding."""
    mask = mask.to(logps.dtype)
    rewards = -kl_coef * (logps - ref_logps) * mask
    rows = torch.arange(scores.numel(), device=scores.device)
    rewards[rows, last_token_index(mask)] += scores.to(rewards.dtype) * (mask.sum(dim=1) > 0).to(rewards.dtype)
    return rewards


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns, both ``(B, T)`` and 0 on padding.

    ``delta_t = r_t + gamma V_{t+1} - V_t`` with ``V`` after the last real token taken as 0, and
    ``A_t = delta_t + gamma lam A_{t+1}``.
    """
    mask = mask.to(values.dtype)
    values = values * mask
    advantages = torch.zeros_like(values)
    running = torch.zeros_like(values[:, 0])
    steps = values.size(1)
    for t in reversed(range(steps)):
        alive = mask[:, t + 1] if t + 1 < steps else torch.zeros_like(running)  # is token t+1 real?
        next_value = values[:, t + 1] * alive if t + 1 < steps else torch.zeros_like(running)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        running = delta + gamma * lam * running * alive
        advantages[:, t] = running
    advantages = advantages * mask
    return advantages, (advantages + values) * mask


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``x`` over the positions where ``mask`` is 1 (0 when there are none)."""
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``x`` shifted to mean 0 and scaled to variance 1 over the masked positions (population variance); 0 on
    padding."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask.to(x.dtype)


def policy_loss(logps: torch.Tensor, old_logps: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
                clip_low: float, clip_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped surrogate, averaged over the masked tokens, and the share of tokens whose ratio was clipped
    against the advantage's direction (scalars)."""
    ratio = torch.exp(logps - old_logps)
    clipped_ratio = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    loss = torch.max(-advantages * ratio, -advantages * clipped_ratio)
    clipped = ((ratio < 1 - clip_low) & (advantages < 0)) | ((ratio > 1 + clip_high) & (advantages > 0))
    return masked_mean(loss, mask), masked_mean(clipped.to(loss.dtype), mask)


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
               clip: float) -> torch.Tensor:
    """``0.5 * max((V - R)^2, (V_clipped - R)^2)`` averaged over the masked tokens, with ``V_clipped`` the value moved
    at most ``clip`` from its rollout value (a scalar)."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    loss = 0.5 * torch.max((values - returns) ** 2, (clipped - returns) ** 2)
    return masked_mean(loss, mask)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """``1 - Var(R - V) / Var(R)`` over the masked tokens: 1 is a perfect value head, 0 no better than a constant
    (NaN when the returns do not vary)."""
    var_returns = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    residual = returns - values
    var_residual = masked_mean((residual - masked_mean(residual, mask)) ** 2, mask)
    return float("nan") if float(var_returns) == 0.0 else float(1.0 - var_residual / var_returns)
