"""PPO for the HARGO comparison (method ``ppo`` of ``rl_hargo.methods``): a value head and token-level GAE on the same
samples, prompts and task rewards as the GRPO-family methods, from the same SFT start.

The pinned TRL (1.16) has no PPO trainer, so ``PPOTrainer`` subclasses its GRPOTrainer, which already samples
(``num_generations`` answers per prompt at ``temperature``), scores with the reward functions and computes the frozen
SFT model's per-token log-probs (``beta`` > 0). PPO ignores the groups: each answer is its own episode.

- **Value head**: a linear layer (zero-initialised, so every value starts at 0) on the policy's last hidden state,
  read by a forward hook on the backbone during the log-prob passes TRL already makes; it lives beside the policy
  (never inside the saved policy, so evaluation loads a plain causal LM) and trains in the same optimizer at its own
  learning rate (``rl_hargo.ppo.value_learning_rate``). TRL's gradient clipping covers the policy's parameters only.
- **Rollout** (``_generate_and_score_completions``): one more forward of the policy without gradients gives the
  sampled tokens' log-probs and the values; per-token rewards are ``-beta (logp - ref_logp)`` plus the task reward on
  the last token; GAE (``gamma``, ``lam``) gives advantages (whitened over the batch's tokens) and returns
  (``hpcrl_core/algorithms/ppo.py``).
- **Loss** (``_compute_loss``): the token-mean clipped surrogate (TRL's ``epsilon`` bounds) plus ``vf_coef`` times the
  clipped value loss. The KL sits in the reward, as PPO does, not in the loss.
- **Checkpoints**: ``value_head.safetensors`` is written into every ``checkpoint-N`` and ``final`` and read back on
  resume.

Test: ``pytest tests/training/test_ppo.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn
from trl import GRPOConfig

from hpcrl_core.algorithms import ppo
from hpcrl_core.config import RLHargoParams
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.training.hargo import OWNED_FIELDS, UNSUPPORTED_OPTIONS, ScoredGRPOTrainer
from hpcrl_core.training.trl_options import check_passthrough, grpo_options

VALUE_HEAD_FILE = "value_head.safetensors"
PPO_OWNED_FIELDS: dict[str, str] = {
    **OWNED_FIELDS,
    **{name: f"rl_hargo.ppo.{name}" for name in ("vf_coef", "cliprange_value", "gamma", "lam", "value_learning_rate",
                                                 "whiten_advantages")},
    "output_dir": "the stage's output folder (checkpoints/rl_hargo/ppo-<seed>)",
}


@dataclass
class PPOConfig(GRPOConfig):
    """GRPOConfig plus PPO's fields (``beta`` is the KL coefficient of the per-token reward).

    Args:
        vf_coef: weight of the value loss.
        cliprange_value: how far a value may move from its rollout value in the clipped value loss.
        gamma: discount over completion tokens.
        lam: GAE lambda.
        value_learning_rate: the value head's learning rate.
        whiten_advantages: advantages to mean 0, std 1 over the batch's completion tokens.
    """

    vf_coef: float = 0.1
    cliprange_value: float = 0.2
    gamma: float = 1.0
    lam: float = 0.95
    value_learning_rate: float = 1e-3
    whiten_advantages: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.beta <= 0:
            raise ValueError(f"PPO's per-token KL reward needs the reference model's log-probs, which TRL computes "
                             f"only when beta > 0; received beta={self.beta}")
        if self.vf_coef < 0 or self.cliprange_value <= 0 or not 0 < self.gamma <= 1 or not 0 <= self.lam <= 1 \
                or self.value_learning_rate <= 0:
            raise ValueError(f"need vf_coef >= 0, cliprange_value > 0, 0 < gamma <= 1, 0 <= lam <= 1 and "
                             f"value_learning_rate > 0; received {self.vf_coef}, {self.cliprange_value}, "
                             f"{self.gamma}, {self.lam}, {self.value_learning_rate}")
        if self.loss_type != "grpo":
            raise ValueError(f"loss_type={self.loss_type!r}: PPOTrainer has its own loss; leave loss_type at 'grpo'")
        for name, neutral in UNSUPPORTED_OPTIONS.items():
            if getattr(self, name) != neutral:
                raise ValueError(f"{name}={getattr(self, name)!r} is not supported by PPOTrainer's loss; "
                                 f"leave it at {neutral!r}")


def ppo_config(rp: RLHargoParams, output_dir: Path, report_to: list[str], seed: int) -> PPOConfig:
    """The PPOConfig of one PPO run: ``rl_hargo`` params (as every method), ``rl_hargo.ppo``, then ``rl_hargo.trl``
    (checked first).

    Raises:
        ConfigError: ``trl`` options PPOConfig refuses, or bad PPO values.
    """
    check_passthrough(rp.trl, PPOConfig, "rl_hargo", PPO_OWNED_FIELDS)
    options = {**grpo_options(rp, output_dir, report_to, seed), "loss_type": "grpo", **rp.ppo.model_dump()}
    options.update(rp.trl)
    try:
        return PPOConfig(**options)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"rl_hargo: PPOConfig rejected the options: {err}",
                          [f"{k}: {v!r}" for k, v in {**rp.ppo.model_dump(), **rp.trl}.items()]) from None


class PPOTrainer(ScoredGRPOTrainer):
    """GRPOTrainer trained by PPO with a value head (see the module docstring).

    Attributes:
        value_head: ``nn.Linear(hidden_size, 1)`` on the policy's last hidden state.
    """

    args: PPOConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, PPOConfig):
            raise ConfigError(f"PPOTrainer needs a PPOConfig; received {type(self.args).__name__}")
        lm = self._causal_lm(self.model)
        hidden = int(lm.config.get_text_config().hidden_size)
        device = next(lm.parameters()).device
        self.value_head = nn.Linear(hidden, 1).to(device=device, dtype=torch.float32)
        nn.init.zeros_(self.value_head.weight)
        nn.init.zeros_(self.value_head.bias)

    # -- the value head -------------------------------------------------------------------------------------------

    def _causal_lm(self, model: Any) -> Any:
        lm = self.accelerator.unwrap_model(model)
        return lm.get_base_model() if hasattr(lm, "get_base_model") else lm  # under PEFT, the causal LM inside

    @contextlib.contextmanager
    def _hidden_states(self, model: Any) -> Iterator[list[torch.Tensor]]:
        """Collect the backbone's last hidden states of every forward inside the block (TRL's fused log-prob head
        runs the backbone, then projects; the hook sees what the head sees)."""
        captured: list[torch.Tensor] = []

        def keep(_module: nn.Module, _inputs: Any, output: Any) -> None:
            captured.append(output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0])

        handle = self._causal_lm(model).base_model.register_forward_hook(keep)
        try:
            yield captured
        finally:
            handle.remove()

    def _values(self, captured: list[torch.Tensor], completion_length: int) -> torch.Tensor:
        """Values ``(B, T)`` of the states before each completion token, from the hidden states of one pass."""
        if not captured:
            raise RuntimeError("the policy's backbone ran no forward under the hook; TRL's log-prob pass has changed")
        hidden = torch.cat(captured, dim=0)[:, -completion_length - 1:-1]
        return self.value_head(hidden.to(self.value_head.weight.dtype)).squeeze(-1)

    def _policy_pass(self, model: Any, inputs: dict[str, Any], compute_entropy: bool
                     ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        completion_ids = inputs["completion_ids"]
        input_ids = torch.cat([inputs["prompt_ids"], completion_ids], dim=1)
        attention_mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
        with self._hidden_states(model) as captured:
            logps, entropies, _ = self._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=compute_entropy)
        return logps, entropies, self._values(captured, completion_ids.size(1))

    def create_optimizer(self, model: Any = None) -> torch.optim.Optimizer:
        fresh = self.optimizer is None
        optimizer = super().create_optimizer(model)
        if fresh:
            optimizer.add_param_group({"params": list(self.value_head.parameters()), "weight_decay": 0.0,
                                       "lr": self.args.value_learning_rate})
        return optimizer

    def save_extra(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        save_file({k: v.detach().contiguous() for k, v in self.value_head.state_dict().items()},
                  str(folder / VALUE_HEAD_FILE))

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        self.save_extra(Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}")
        super()._save_checkpoint(model, trial)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        if checkpoint is not None:
            path = Path(checkpoint) / VALUE_HEAD_FILE
            try:
                self.value_head.load_state_dict(load_file(str(path), device=str(self.value_head.weight.device)))
            except (OSError, RuntimeError, SafetensorError) as err:
                raise DataError(f"{path}: cannot restore the PPO value head of this checkpoint ({err}); delete the "
                                "checkpoint folder to restart from the one before") from None
        super()._load_optimizer_and_scheduler(checkpoint)

    # -- rollout and loss -----------------------------------------------------------------------------------------

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out = super()._generate_and_score_completions(inputs)
        mask = out["completion_mask"].to(torch.float32)
        scores = self.summed_rewards()[self.local_part(mask.size(0))].to(mask.device)
        with torch.no_grad():
            logps, _, values = self._policy_pass(self.model, out, compute_entropy=False)
        old = out.get("old_per_token_logps")
        old = logps if old is None else old  # the sampling policy's log-probs (TRL's when it computed them)
        rewards = ppo.token_rewards(scores, old, out["ref_per_token_logps"], mask, self.beta)
        advantages, returns = ppo.gae(rewards, values, mask, self.args.gamma, self.args.lam)
        if self.args.whiten_advantages:
            advantages = ppo.whiten(advantages, mask)
        out.update({"old_per_token_logps": old, "ppo_advantages": advantages, "ppo_returns": returns,
                    "ppo_values": values})
        metrics = self._metrics[self._mode()]
        metrics["ppo/kl"].append(float(ppo.masked_mean(old - out["ref_per_token_logps"], mask)))
        metrics["ppo/value_mean"].append(float(ppo.masked_mean(values, mask)))
        metrics["ppo/explained_variance"].append(ppo.explained_variance(values, returns, mask))
        return out

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        mask = inputs["completion_mask"].to(torch.float32)
        logps, entropies, values = self._policy_pass(model, inputs, compute_entropy=True)
        pg, clipped = ppo.policy_loss(logps, inputs["old_per_token_logps"], inputs["ppo_advantages"], mask,
                                      self.epsilon_low, self.epsilon_high)
        vf = ppo.value_loss(values, inputs["ppo_values"], inputs["ppo_returns"], mask, self.args.cliprange_value)
        loss = pg + self.args.vf_coef * vf
        metrics = self._metrics[self._mode()]
        metrics["ppo/policy_loss"].append(float(pg.detach()))
        metrics["ppo/value_loss"].append(float(vf.detach()))
        metrics["clip_ratio/region_mean"].append(float(clipped))
        if entropies is not None:
            metrics["entropy"].append(float(ppo.masked_mean(entropies.detach(), mask)))
        accumulation = getattr(self, "current_gradient_accumulation_steps", self.args.gradient_accumulation_steps)
        return loss / (accumulation if self._mode() == "train" else 1.0)
