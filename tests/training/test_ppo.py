"""PPOTrainer (hpcrl_core/training/ppo.py): the value head gets the hidden states and the gradient, rollouts carry
token-level advantages, checkpoints keep the value head and a resume restores it, bad options stop before training.

Run: pytest tests/training/test_ppo.py
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file

from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.saved import load_saved_policy
from hpcrl_core.training import ppo as ppo_mod
from hpcrl_core.training.hargo import build_hargo_trainer, run_hargo
from hpcrl_core.training.ppo import VALUE_HEAD_FILE, PPOConfig, PPOTrainer, ppo_config
from tests.training.test_hargo import G, hargo_params, inputs, varied_reward  # noqa: F401 (fixture)


def _batch(trainer: PPOTrainer) -> dict[str, Any]:
    rows = [trainer.train_dataset[i] for i in (0, 5)]
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer._generate_and_score_completions([dict(r) for r in rows for _ in range(G)])


def test_the_hooks_ppo_overrides_exist_with_these_signatures() -> None:
    from transformers import Trainer

    assert list(inspect.signature(Trainer.create_optimizer).parameters)[:2] == ["self", "model"]
    for name in ("_generate_and_score_completions", "_compute_loss", "_save_checkpoint",
                 "_load_optimizer_and_scheduler", "create_optimizer"):
        assert name in PPOTrainer.__dict__, name


def test_options_are_checked_before_training(tmp_path: Path) -> None:
    args = ppo_config(hargo_params().rl_hargo, tmp_path, [], 1)
    assert (args.vf_coef, args.lam, args.value_learning_rate, args.beta) == (0.1, 0.95, 1e-3, 0.02)
    assert ppo_config(hargo_params(ppo={"lam": 0.5}).rl_hargo, tmp_path, [], 1).lam == 0.5
    with pytest.raises(ConfigError, match=r"rl_hargo.trl.vf_coef: owned.*rl_hargo.ppo.vf_coef"):
        ppo_config(hargo_params(trl={"vf_coef": 0.5}).rl_hargo, tmp_path, [], 1)
    with pytest.raises(ConfigError, match="not a field of PPOConfig"):
        ppo_config(hargo_params(trl={"value_lr": 0.5}).rl_hargo, tmp_path, [], 1)
    with pytest.raises(ConfigError, match="top_entropy_quantile"):
        ppo_config(hargo_params(trl={"top_entropy_quantile": 0.5}).rl_hargo, tmp_path, [], 1)
    with pytest.raises(ValueError, match="needs the reference model"):
        PPOConfig(output_dir=str(tmp_path), beta=0.0, use_cpu=True)
    with pytest.raises(ValueError, match="cliprange_value"):
        PPOConfig(output_dir=str(tmp_path), beta=0.02, cliprange_value=0.0, use_cpu=True)


def test_a_rollout_carries_token_advantages_and_the_loss_trains_the_value_head(
        inputs: tuple[Path, Path], tmp_path: Path) -> None:  # noqa: F811
    data, sft = inputs
    trainer = build_hargo_trainer(hargo_params(), data, sft, tmp_path / "out", [], "ppo", 1,
                                  reward_funcs=[varied_reward])
    assert isinstance(trainer, PPOTrainer)
    out = _batch(trainer)
    mask = out["completion_mask"].float()
    for key in ("ppo_advantages", "ppo_returns", "ppo_values", "old_per_token_logps"):
        assert out[key].shape == out["completion_ids"].shape, key
    assert torch.all(out["ppo_values"] == 0)  # a zero-initialised head
    assert torch.all(out["ppo_advantages"][mask == 0] == 0) and torch.all(out["ppo_returns"][mask == 0] == 0)
    adv = out["ppo_advantages"][mask == 1]
    assert abs(float(adv.mean())) < 1e-5 and float(adv.std(unbiased=False)) == pytest.approx(1.0, abs=1e-3)
    # with values 0 and lam 0.95 < 1 the first token's return is no longer the whole reward, but the last real
    # token's return is that token's reward: the task reward minus beta times its log-ratio
    last = mask.sum(dim=1).long() - 1
    rows = torch.arange(mask.size(0))
    scores = trainer.summed_rewards()
    kl_last = out["old_per_token_logps"][rows, last] - out["ref_per_token_logps"][rows, last]
    assert torch.allclose(out["ppo_returns"][rows, last], scores - trainer.beta * kl_last, atol=1e-5)

    loss = trainer._compute_loss(trainer.model, out)
    assert torch.isfinite(loss)
    loss.backward()
    head = trainer.value_head.weight.grad
    assert head is not None and float(head.abs().sum()) > 0, "the value loss reaches the value head"
    policy_grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
    assert policy_grads and any(float(g.abs().sum()) > 0 for g in policy_grads)

    trainer.value_head.weight.grad = None
    for p in trainer.model.parameters():
        p.grad = None
    trainer.args.vf_coef = 0.0
    trainer._compute_loss(trainer.model, out).backward()
    assert trainer.value_head.weight.grad is None or float(trainer.value_head.weight.grad.abs().sum()) == 0


def test_a_run_saves_the_value_head_and_resume_restores_it(inputs: tuple[Path, Path], tmp_path: Path,  # noqa: F811
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    data, sft = inputs
    out = tmp_path / "rl"
    first = run_hargo(hargo_params(), data, sft, out, [], "ppo", 1, reward_funcs=[varied_reward])
    assert first["global_step"] == 2 and first["ema"] is None and first["method"] == "ppo"
    saved = load_file(str(out / "checkpoint-2" / VALUE_HEAD_FILE))
    assert float(saved["weight"].abs().sum()) > 0, "two steps at value_learning_rate move the head off zero"
    assert (out / "final" / VALUE_HEAD_FILE).is_file()
    model, _ = load_saved_policy(out / "final", trainable=False, key="final")  # a plain causal LM, no value head
    assert not any("value_head" in name for name, _ in model.named_parameters())

    seen: list[torch.Tensor] = []
    real = PPOTrainer._generate_and_score_completions

    def spy(self: PPOTrainer, batch: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(self.value_head.weight.detach().clone())
        return real(self, batch)

    monkeypatch.setattr(ppo_mod.PPOTrainer, "_generate_and_score_completions", spy)
    second = run_hargo(hargo_params(max_steps=3), data, sft, out, [], "ppo", 1, reward_funcs=[varied_reward])
    assert second["resumed_from"] == str(out / "checkpoint-2") and second["global_step"] == 3
    assert seen and torch.equal(seen[0], saved["weight"])

    (out / "checkpoint-3" / VALUE_HEAD_FILE).write_bytes(b"not a tensor file")
    with pytest.raises(DataError, match="cannot restore the PPO value head"):
        run_hargo(hargo_params(max_steps=4), data, sft, out, [], "ppo", 1, reward_funcs=[varied_reward])
