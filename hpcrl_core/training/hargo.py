"""HARGO (Li & Tian 2026) as a subclass of TRL's GRPOTrainer: confidence-modulated advantages and per-response loss
weights from a registered estimator (``hpcrl_core/algorithms/advantages.py``), for every method of the comparison.

TRL 1.16 has no advantage hook, so ``HARGOTrainer`` overrides four members:

- ``_calculate_rewards``: calls TRL's and keeps the (B*G, n_funcs) rewards of the batch, which TRL turns into its own
  advantages and does not return.
- ``_generate_and_score_completions``: after TRL's, computes the estimator from the summed rewards and the mean token
  log-prob of every completion under the frozen reference model (TRL's ``ref_per_token_logps``, present because
  beta > 0), replaces ``advantages`` with the estimator's (HARGO: ``A_mod``) and adds ``hargo_weights`` = G w_i (so
  uniform weights are 1). The EMA baseline lives on the trainer.
- ``_compute_loss``: ``loss = sum_groups sum_i w_i L_i / n_groups`` with ``L_i`` = the mean over response i's tokens of
  the clipped surrogate with ``A_mod`` *plus* beta times the KL term, so the weights reach the KL too (scaling the
  advantages alone would leave it unweighted). With uniform weights this is TRL's ``loss_type="grpo"``; every method
  of the comparison (grpo, dr_grpo, hargo, hargo_b1, hargo_b2) goes through this one loss, so only the estimator
  differs between them.
- ``_save_checkpoint`` / ``_load_optimizer_and_scheduler``: the EMA (``hargo_state.json``) is written into
  ``checkpoint-N`` before TRL writes ``trainer_state.json`` there, and read back on resume (TRL restores its own
  entropy controller at the same hook).

Run: ``python -m hpcrl_core.training.hargo [PARAMS] [DATA_DIR] [SFT_DIR] [OUTPUT_DIR] [METHOD] [SEED]`` (no tracking).
Test: ``pytest tests/training/test_hargo.py``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from hpcrl_core.algorithms.advantages import ADVANTAGES
from hpcrl_core.config import ESTIMATORS, Params, RLHargoParams, load_params
from hpcrl_core.data.schema import Record, read_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.generate import fitting_prompt_rows
from hpcrl_core.files import write_text_atomic
from hpcrl_core.models.saved import load_saved_policy
from hpcrl_core.training.checkpoints import (
    finished_state,
    last_checkpoint,
    last_logged,
    save_log_history,
    save_policy,
)
from hpcrl_core.training.mlflow_callback import use_hpcrl_mlflow
from hpcrl_core.training.run_record import write_run_record
from hpcrl_core.training.trl_options import check_passthrough, grpo_options

STATE_FILE = "hargo_state.json"
FINAL_DIR = "final"
NEEDS_REFERENCE = frozenset({"hargo", "hargo_b2"})  # estimators that read the reference log-probs
# GRPOConfig features the weighted loss does not implement; refused rather than silently ignored
UNSUPPORTED_OPTIONS = {"top_entropy_quantile": 1.0, "off_policy_mask_threshold": None, "entropy_coef": 0.0,
                "use_adaptive_entropy": False}
OWNED_FIELDS: dict[str, str] = {
    **{name: f"rl_hargo.{name}" for name in RLHargoParams.model_fields
       if name not in ("trl", "warmup_ratio", "methods", "seeds", "families", "max_items_per_family", "ppo")},
    "warmup_steps": "rl_hargo.warmup_ratio",
    "loss_type": "the HARGO loss (sum_i w_i L_i; uniform weights = loss_type grpo)",
    "seed": "the run's seed (one of rl_hargo.seeds)",
    "output_dir": "the stage's output folder (checkpoints/rl_hargo/<method>-<seed>)",
    "report_to": "the flow (report_to argument)",
    "save_strategy": "rl_hargo.save_steps",
}


@dataclass
class HARGOConfig(GRPOConfig):
    """GRPOConfig plus HARGO's fields.

    Args:
        estimator: a name in ``ADVANTAGES`` (grpo, dr_grpo, hargo, hargo_b1, hargo_b2).
        alpha: confidence modulation strength (``A_mod = A (1 + alpha c)``), >= 0.
        rho: EMA decay of the reference log-prob baseline, in [0, 1).
    """

    estimator: str = "hargo"
    alpha: float = 0.3
    rho: float = 0.9

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.estimator not in ADVANTAGES:
            raise ValueError(f"estimator={self.estimator!r}; known: {', '.join(ADVANTAGES.names())}")
        if self.alpha < 0 or not 0 <= self.rho < 1:
            raise ValueError(f"alpha={self.alpha}, rho={self.rho}; need alpha >= 0 and 0 <= rho < 1")
        if self.estimator in NEEDS_REFERENCE and self.beta <= 0:
            raise ValueError(f"estimator {self.estimator!r} needs the reference model's log-probs, which TRL computes "
                             f"only when beta > 0; received beta={self.beta}")
        if self.loss_type != "grpo":
            raise ValueError(f"loss_type={self.loss_type!r}: HARGOTrainer has its own weighted loss (uniform weights "
                             "equal loss_type 'grpo'); leave loss_type at 'grpo'")
        for name, neutral in UNSUPPORTED_OPTIONS.items():
            if getattr(self, name) != neutral:
                raise ValueError(f"{name}={getattr(self, name)!r} is not supported by HARGOTrainer's loss; "
                                 f"leave it at {neutral!r}")


class ScoredGRPOTrainer(GRPOTrainer):
    """GRPOTrainer that keeps the batch's rewards (TRL turns them into its own advantages and does not return them):
    the base of the comparison's online trainers (``HARGOTrainer`` here, ``PPOTrainer`` in ``training/ppo.py``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._last_rewards: torch.Tensor | None = None

    def _calculate_rewards(self, inputs: list[dict[str, Any]], prompts: list[Any], completions: list[Any],
                           completion_ids_list: list[Any]) -> torch.Tensor:
        self._last_rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        return self._last_rewards

    def summed_rewards(self) -> torch.Tensor:
        """The last batch's rewards summed over the reward functions with their weights, ``(B*G,)`` over all
        processes.

        Raises:
            DataError: a completion no reward function scored.
        """
        per_func = self._last_rewards
        if per_func is None:
            raise RuntimeError("TRL computed no rewards through _calculate_rewards; the hook has changed")
        if torch.isnan(per_func).all(dim=1).any():
            raise DataError("a completion got no reward from any reward function (all None); every item of the "
                            "HARGO data must be scored by its family's reward")
        return (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)

    def local_part(self, n_local: int) -> slice:
        """This process's slice of a gathered ``(B*G,)`` tensor."""
        return slice(self.accelerator.process_index * n_local, (self.accelerator.process_index + 1) * n_local)

    def _mode(self) -> str:
        return "train" if self.model is not None and self.model.training else "eval"

    def save_extra(self, folder: Path) -> None:
        """Write what a checkpoint of this method holds beyond TRL's own files (nothing here)."""


class HARGOTrainer(ScoredGRPOTrainer):
    """GRPOTrainer whose advantages and loss weights come from ``args.estimator`` (see the module docstring).

    Attributes:
        ema: HARGO's baseline g of reference log-probs; None until the first batch.
    """

    args: HARGOConfig

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not isinstance(self.args, HARGOConfig):
            raise ConfigError(f"HARGOTrainer needs a HARGOConfig; received {type(self.args).__name__}")
        self.ema: float | None = None
        self._estimate = ADVANTAGES.get(self.args.estimator)

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        out = super()._generate_and_score_completions(inputs)
        rewards = self.summed_rewards()
        mode = self._mode()
        group = self.num_generations if mode == "train" else self.num_generations_eval
        if group is None:
            raise ConfigError("num_generations is unset: HARGO needs whole groups of responses per prompt")
        ref_logps = None
        if "ref_per_token_logps" in out:
            mask = out["completion_mask"].to(out["ref_per_token_logps"].dtype)
            local = (out["ref_per_token_logps"] * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
            ref_logps = self.accelerator.gather(local)
        est = self._estimate(rewards, group_size=group, ref_logps=ref_logps, ema=self.ema,
                             alpha=self.args.alpha, rho=self.args.rho)
        if mode == "train":
            self.ema = est.ema
        part = self.local_part(out["completion_ids"].size(0))
        device = out["advantages"].device
        out["advantages"] = est.advantages[part].to(device=device, dtype=out["advantages"].dtype)
        out["hargo_weights"] = (est.weights[part] * group).to(device=device, dtype=out["advantages"].dtype)
        self._log_estimator(mode, est.weights.view(-1, group), est.ema, est.confidence)
        return out

    def _log_estimator(self, mode: str, weights: torch.Tensor, ema: float | None,
                       confidence: torch.Tensor | None) -> None:
        metrics = self._metrics[mode]
        metrics["hargo/weight_max"].append(float(weights.max(dim=1).values.mean()))
        if ema is not None:
            metrics["hargo/ema"].append(float(ema))
        if confidence is not None:
            metrics["hargo/confidence"].append(float(confidence.mean()))

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        prompt_ids, prompt_mask = inputs["prompt_ids"], inputs["prompt_mask"]
        completion_ids, completion_mask = inputs["completion_ids"], inputs["completion_mask"]
        input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
        attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
        mask = completion_mask if "tool_mask" not in inputs else completion_mask * inputs["tool_mask"]
        logps, entropies, _ = self._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1), compute_entropy=True)  # (B, T) each
        advantages = inputs["advantages"].unsqueeze(1)  # (B, 1)
        old = inputs.get("old_per_token_logps")
        log_ratio = logps - (logps.detach() if old is None else old)
        if self.importance_sampling_level == "sequence":
            log_ratio = ((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
        coef_1 = torch.exp(log_ratio)
        coef_2 = torch.clamp(coef_1, 1 - self.epsilon_low, 1 + self.epsilon_high)
        if self.args.delta is not None:
            coef_1 = torch.clamp(coef_1, max=self.args.delta)
        per_token = -torch.min(coef_1 * advantages, coef_2 * advantages)
        if "importance_sampling_ratio" in inputs:  # vLLM sampling correction, as in TRL
            per_token = per_token * inputs["importance_sampling_ratio"]
        if self.beta != 0.0:
            ref = inputs["ref_per_token_logps"]
            kl = torch.exp(ref - logps) - (ref - logps) - 1
            if self.args.use_bias_correction_kl:
                kl = kl * coef_1
            per_token = per_token + self.beta * kl
        per_response = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)  # L_i, (B,)
        weights = inputs["hargo_weights"]  # G w_i: the mean over a micro-batch is sum_i w_i L_i / n_groups
        mode = self._mode()
        loss = (weights * per_response).mean()
        self._log_loss_terms(mode, mask, entropies, coef_1, advantages, kl if self.beta != 0.0 else None)
        # Trainer sets current_gradient_accumulation_steps in train(); a loss computed outside it is not accumulated
        accumulation = getattr(self, "current_gradient_accumulation_steps", self.args.gradient_accumulation_steps)
        return loss / (accumulation if mode == "train" else 1.0)

    def _log_loss_terms(self, mode: str, mask: torch.Tensor, entropies: torch.Tensor, coef_1: torch.Tensor,
                        advantages: torch.Tensor, kl: torch.Tensor | None) -> None:
        def masked_mean(x: torch.Tensor) -> float:
            x = x.expand_as(mask) if x.shape[1] == 1 else x
            totals = self.accelerator.reduce(torch.stack([(x * mask).sum(), mask.sum().float()]), reduction="sum")
            return float(totals[0] / totals[1].clamp(min=1.0))

        metrics = self._metrics[mode]
        if kl is not None:
            metrics["kl"].append(masked_mean(kl.detach()))
        metrics["entropy"].append(masked_mean(entropies.detach()))
        clipped = ((coef_1 < 1 - self.epsilon_low) & (advantages < 0)) | ((coef_1 > 1 + self.epsilon_high)
                                                                         & (advantages > 0))
        metrics["clip_ratio/region_mean"].append(masked_mean(clipped.float()))

    def save_extra(self, folder: Path) -> None:
        save_state(folder, self.ema, self.args.estimator)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}"
        folder.mkdir(parents=True, exist_ok=True)
        self.save_extra(folder)
        super()._save_checkpoint(model, trial)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self.ema = load_state(Path(checkpoint), self.args.estimator)


def save_state(folder: Path, ema: float | None, estimator: str) -> None:
    """Write ``hargo_state.json`` (the EMA baseline and the estimator it belongs to) atomically."""
    write_text_atomic(folder / STATE_FILE, json.dumps({"ema": ema, "estimator": estimator}) + "\n")


def load_state(folder: Path, estimator: str) -> float | None:
    """The EMA saved in ``folder``.

    Raises:
        DataError: the file is missing or unreadable, or was written by another estimator (a checkpoint of another
            method in the wrong folder).
    """
    path = folder / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise DataError(f"{path}: cannot read the HARGO state of this checkpoint ({err}); delete the checkpoint "
                        "folder to restart from the one before") from None
    if state.get("estimator") != estimator:
        raise DataError(f"{path}: written by estimator {state.get('estimator')!r}, but this run is {estimator!r}; "
                        "each method needs its own output folder")
    ema = state.get("ema")
    return None if ema is None else float(ema)


def hargo_config(rp: RLHargoParams, output_dir: Path, report_to: list[str], method: str, seed: int) -> HARGOConfig:
    """The HARGOConfig of one run of the comparison: ``rl_hargo`` params, ``method`` as estimator, ``seed``."""
    check_passthrough(rp.trl, HARGOConfig, "rl_hargo", OWNED_FIELDS)
    if method not in ESTIMATORS:
        raise ConfigError(f"method {method!r} is not an estimator; known: {', '.join(ESTIMATORS)} (and ppo, "
                          "through build_hargo_trainer)")
    options = {**grpo_options(rp, output_dir, report_to, seed), "loss_type": "grpo", "scale_rewards": "group",
               "estimator": method, "alpha": rp.alpha, "rho": rp.rho}
    options.update(rp.trl)
    try:
        return HARGOConfig(**options)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"rl_hargo: HARGOConfig rejected the options: {err}",
                          [f"{k}: {v!r}" for k, v in {"estimator": method, **rp.trl}.items()]) from None


def task_row(record: Record) -> dict[str, Any]:
    """A dataset row for the task rewards: the prompt, the item's ``family``, reference ``answer``, MLPerf
    ``aliases`` and ``partial`` (empty lists for other families) and ``item_id``."""
    meta = record.metadata
    return {"prompt": record.prompt, "family": record.family, "answer": record.answer,
            "aliases": [str(a) for a in meta.get("aliases") or []],
            "partial": [str(p) for p in meta.get("partial") or []], "item_id": record.id}


def prompt_files(rp: RLHargoParams, data_dir: Path) -> list[Path]:
    """The files RL draws its prompts from: ``data/<family>/<prompts>.jsonl`` for each of ``families``."""
    return [data_dir / family / f"{rp.prompts}.jsonl" for family in rp.families]


def task_dataset(rp: RLHargoParams, data_dir: Path) -> Dataset:
    """The mixed prompt set: the first ``max_items_per_family`` records of ``data/<family>/<prompts>.jsonl`` for
    each of ``families``, in family order (TRL's sampler shuffles).

    Raises:
        DataError: a family's prompt file is missing or empty (naming the settings that fill it).
    """
    rows: list[dict[str, Any]] = []
    for family, path in zip(rp.families, prompt_files(rp, data_dir), strict=True):
        if not path.is_file():
            raise DataError(f"{path} is missing; run `dvc repro prepare` to create the {family} items")
        records = [r for _, r in zip(range(rp.max_items_per_family), read_jsonl(path), strict=False)]
        if not records and rp.prompts == "rl":
            raise DataError(f"{path} holds no records: prepare made no RL-only {family} items. Set "
                            "prepare.race.rl_pairs / prepare.<family>.rl_phrasings (synthetic items) or "
                            "prepare.rl_fraction (file sources) above 0 and run `dvc repro prepare`, or let RL ask "
                            "SFT's own items with rl_hargo.prompts: train")
        if not records:
            raise DataError(f"{path} holds no records")
        rows += [task_row(r) for r in records]
    return Dataset.from_list(rows)


def build_hargo_trainer(params: Params, data_dir: Path, sft_dir: Path, output_dir: Path, report_to: list[str],
                        method: str, seed: int, reward_funcs: Sequence[Callable[..., Any]] | None = None
                        ) -> ScoredGRPOTrainer:
    """The trainer of one (method, seed) run, every check done before the first step: a HARGOTrainer for an
    estimator, a PPOTrainer (``training/ppo.py``) for ``ppo``.

    Args:
        reward_funcs: TRL reward functions; default: the ``hpc_tasks`` reward (each item by its family's reward).

    Raises:
        ConfigError: bad ``rl_hargo`` options or method, no SFT model in ``sft_dir``.
        DataError: a family's train data is missing.
    """
    rp = params.rl_hargo
    trainer_cls: type[ScoredGRPOTrainer]
    args: GRPOConfig
    if method == "ppo":
        from hpcrl_core.training.ppo import PPOTrainer, ppo_config

        args, trainer_cls = ppo_config(rp, output_dir, report_to, seed), PPOTrainer
    else:
        args, trainer_cls = hargo_config(rp, output_dir, report_to, method, seed), HARGOTrainer
    dataset = task_dataset(rp, data_dir)
    if reward_funcs is None:
        from hpcrl_core.rewards import RewardContext, get_reward

        reward_funcs = [get_reward("hpc_tasks")(RewardContext(params=params, executor=None))]
    model, tokenizer = load_saved_policy(sft_dir, trainable=True, key="sft_dir")
    dataset = fitting_prompt_rows(dataset, model, tokenizer, rp.max_completion_length, "rl_hargo")
    trainer = trainer_cls(model=model, reward_funcs=list(reward_funcs), args=args, train_dataset=dataset,
                          processing_class=tokenizer)
    use_hpcrl_mlflow(trainer)
    return trainer


def run_hargo(params: Params, data_dir: Path, sft_dir: Path, output_dir: Path, report_to: list[str], method: str,
              seed: int, reward_funcs: Sequence[Callable[..., Any]] | None = None) -> dict[str, Any]:
    """Train one run (resuming from the last complete checkpoint with its EMA or value head) and save ``final``.

    Returns:
        ``global_step``, ``train_loss``, ``resumed_from``, ``final_dir``, ``method``, ``seed``, ``ema``.
    """
    resume = last_checkpoint(output_dir)
    trainer = build_hargo_trainer(params, data_dir, sft_dir, output_dir, report_to, method, seed, reward_funcs)
    final = output_dir / FINAL_DIR
    done = finished_state(resume, final, trainer.args.max_steps)
    if done is not None:  # reached its budget before: keep final as it is (resuming would train one more step)
        ema = load_state(final, method) if method in ESTIMATORS else None
        write_run_record(final, method=method, seed=seed, kind="online", start_dir=sft_dir, params=params)
        return {"global_step": int(done["global_step"]), "train_loss": last_logged(done, "train_loss"),
                "resumed_from": str(resume), "final_dir": str(final), "method": method, "seed": seed, "ema": ema}
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    save_policy(trainer, final)
    trainer.save_extra(final)
    save_log_history(trainer, final)
    write_run_record(final, method=method, seed=seed, kind="online", start_dir=sft_dir, params=params)
    return {"global_step": int(trainer.state.global_step), "train_loss": float(result.training_loss),
            "resumed_from": str(resume) if resume else None, "final_dir": str(final), "method": method,
            "seed": seed, "ema": getattr(trainer, "ema", None)}


def main(argv: list[str]) -> None:
    defaults = ["params.yaml", "data", "checkpoints/sft/final", "checkpoints/rl_hargo/hargo-1", "hargo", "1"]
    if argv[:1] in (["-h"], ["--help"]) or len(argv) > len(defaults):
        print(__doc__)
        return
    params_path, data_dir, sft_dir, output_dir, method, seed = argv + defaults[len(argv):]
    print(run_hargo(load_params(params_path), Path(data_dir), Path(sft_dir), Path(output_dir), [], method, int(seed)))


if __name__ == "__main__":
    main(sys.argv[1:])
