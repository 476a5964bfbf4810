"""Assemble TRL's SFTTrainer for the ``sft`` stage: params → policy, data, SFTConfig → trainer; run and resume it.

No maths here: TRL trains on the completion only (prompt-completion records), AdamW with warmup + the scheduler of
``sft.lr_scheduler_type``. Everything that could fail is checked before the first step: the ``sft.trl`` passthrough
names against SFTConfig's fields, ``sft.max_length`` against the model's positions, and the data files; records
longer than ``sft.max_length`` are skipped with a count (``notes`` in the result). Layout of ``output_dir``
(``checkpoints/sft``)::

    tokenizer/        the tiny tokenizer trained on data/ (reused when resuming, so the vocabulary stays the same)
    checkpoint-N/     Trainer checkpoints (model, tokenizer, optimizer, trainer_state.json); a rerun resumes here
    final/            the final model and tokenizer, what the RL stages load, and log_history.json (the curves)

Run: ``python -m hpcrl_core.training.sft [PARAMS] [DATA_DIR] [OUTPUT_DIR]`` (no tracking; the flow adds MLflow).
Test: ``pytest tests/training/test_sft.py``.
"""

from __future__ import annotations

import logging
import math
import sys
from pathlib import Path
from typing import Any

from trl import SFTConfig, SFTTrainer

from hpcrl_core.config import ModelParams, Params, SFTParams, load_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.build import load_policy
from hpcrl_core.models.tokenizer import save_tokenizer
from hpcrl_core.training.checkpoints import (
    finished_state,
    last_checkpoint,
    last_logged,
    save_log_history,
    save_policy,
)
from hpcrl_core.training.mlflow_callback import use_hpcrl_mlflow
from hpcrl_core.training.sft_data import fitting_datasets, load_sft_datasets, mean_completion_tokens
from hpcrl_core.training.trl_options import check_passthrough, device_options

logger = logging.getLogger(__name__)

TOKENIZER_DIR = "tokenizer"
FINAL_DIR = "final"
# SFTConfig fields that sft params or the assembly own, and where to set them instead (a passthrough is ambiguous).
OWNED_FIELDS: dict[str, str] = {
    **{name: f"sft.{name}" for name in SFTParams.model_fields
       if name not in ("families", "repeats", "trl", "warmup_ratio")},
    "warmup_steps": "sft.warmup_ratio",
    "output_dir": "the stage's output folder (checkpoints/sft)",
    "report_to": "the flow (report_to argument)",
    "eval_strategy": "sft.eval_steps (evaluation runs every eval_steps when eval data exist)",
    "save_strategy": "sft.save_steps",
}


def check_trl_options(options: dict[str, Any]) -> None:
    """Raise unless every ``sft.trl`` key is an SFTConfig field that sft params do not already own.

    Raises:
        ConfigError: listing unknown names (with the allowed ones) and names to set elsewhere.
    """
    check_passthrough(options, SFTConfig, "sft", OWNED_FIELDS)


def sft_config(sp: SFTParams, output_dir: Path, report_to: list[str], has_eval: bool) -> SFTConfig:
    """The SFTConfig for ``sft`` params: CPU-safe defaults, steps-based eval and save, ``sft.trl`` on top."""
    check_trl_options(sp.trl)
    options: dict[str, Any] = {
        "output_dir": str(output_dir), "report_to": report_to, "seed": sp.seed, "data_seed": sp.seed,
        "max_steps": sp.max_steps, "learning_rate": sp.learning_rate, "lr_scheduler_type": sp.lr_scheduler_type,
        "warmup_steps": sp.warmup_ratio, "weight_decay": sp.weight_decay,
        "per_device_train_batch_size": sp.per_device_train_batch_size,
        "per_device_eval_batch_size": sp.per_device_eval_batch_size,
        "gradient_accumulation_steps": sp.gradient_accumulation_steps, "max_length": sp.max_length,
        "eval_strategy": "steps" if has_eval else "no", "eval_steps": sp.eval_steps,
        "save_strategy": "steps", "save_steps": sp.save_steps, "save_total_limit": sp.save_total_limit,
        "logging_steps": sp.logging_steps,
        "completion_only_loss": True,  # loss on the assistant's answer only, never on the prompt
        **device_options(),
        "activation_checkpointing": False,  # the tiny model's activations are small; recomputing them only costs time
        # Batches of similar length: the families' records range from ~10 to ~450 tokens, and random batches
        # spent most of their compute on padding (about 2.5x slower per epoch on the default data).
        "train_sampling_strategy": "group_by_length",
    }
    options.update(sp.trl)
    try:
        return SFTConfig(**options)
    except ValueError as err:
        raise ConfigError(f"sft: SFTConfig rejected the options: {err}", [f"{k}: {v!r}" for k, v in sp.trl.items()]
                          ) from None


class UniformTokenSFTTrainer(SFTTrainer):
    """SFTTrainer whose training loss divides the batch's summed token loss by a constant, ``tokens_per_step``
    (``sft.token_weighting: uniform``), instead of by the batch's own completion tokens: with length-grouped batches
    the mean made a token of a short record weigh as much as several tokens of a long one, and the first tokens of
    short kernels (their plan lines) outweighed those of long ones. Evaluation keeps the per-batch mean."""

    def __init__(self, *args: Any, tokens_per_step: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tokens_per_step = tokens_per_step

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        if model.training:
            num_items_in_batch = self.tokens_per_step
        return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                    num_items_in_batch=num_items_in_batch)


def _policy_params(mp: ModelParams, output_dir: Path) -> ModelParams:
    """When resuming, reuse the tokenizer saved by the earlier run, so the resumed model keeps its vocabulary."""
    saved = output_dir / TOKENIZER_DIR
    resuming = last_checkpoint(output_dir) is not None
    if mp.source == "tiny" and not mp.tokenizer.path and resuming and (saved / "tokenizer_config.json").is_file():
        return mp.model_copy(update={"tokenizer": mp.tokenizer.model_copy(update={"path": str(saved)})})
    return mp


def build_sft_trainer(params: Params, data_dir: Path, output_dir: Path, report_to: list[str],
                      notes: dict[str, str] | None = None) -> SFTTrainer:
    """An SFTTrainer ready to ``train()``, with every check done.

    Args:
        params: all params; uses ``sft`` and ``model``.
        data_dir: prepared data (``data/``).
        output_dir: checkpoints and the tokenizer go here (``checkpoints/sft``).
        report_to: transformers integrations to log to, e.g. ``["mlflow"]``; ``[]`` for none.
        notes: when given, says here how many records longer than ``sft.max_length`` were skipped
            (``train_too_long``, ``eval_too_long``).

    Raises:
        ConfigError: a bad ``sft.trl`` name, ``sft.max_length`` below every train record or above the tiny model's
            positions, or a model problem from ``load_policy``.
        DataError: a family's train/eval file is missing or malformed.
    """
    sp = params.sft
    check_trl_options(sp.trl)
    mp = _policy_params(params.model, output_dir)
    if mp.source == "tiny" and sp.max_length > mp.tiny.max_position_embeddings:
        raise ConfigError(f"sft.max_length: received {sp.max_length}, above model.tiny.max_position_embeddings "
                          f"({mp.tiny.max_position_embeddings}); lower one or raise the other")
    train, evaluation = load_sft_datasets(data_dir, sp.families, sp.seed, sp.repeats)
    model, tokenizer = load_policy(mp, data_dir, seed=sp.seed)
    save_tokenizer(tokenizer, output_dir / TOKENIZER_DIR)
    train, evaluation = fitting_datasets(sp.max_length, train, evaluation, tokenizer, {} if notes is None else notes)
    args = sft_config(sp, output_dir, report_to, has_eval=len(evaluation) > 0)
    common: dict[str, Any] = {"model": model, "args": args, "train_dataset": train,
                              "eval_dataset": evaluation if len(evaluation) else None, "processing_class": tokenizer}
    if sp.token_weighting == "uniform":
        per_step = sp.per_device_train_batch_size * sp.gradient_accumulation_steps
        trainer: SFTTrainer = UniformTokenSFTTrainer(
            **common, tokens_per_step=per_step * mean_completion_tokens(train, tokenizer))
    else:
        trainer = SFTTrainer(**common)
    return use_hpcrl_mlflow(trainer)


def run_sft(params: Params, data_dir: Path, output_dir: Path, report_to: list[str]) -> dict[str, Any]:
    """Train (resuming from the last checkpoint if any), save ``output_dir/final``, and report the losses.

    Returns:
        ``train_loss`` (mean over this run's steps), ``eval_loss`` (final eval; NaN without eval data),
        ``global_step``, ``resumed_from`` (checkpoint path or None), ``final_dir`` and ``notes`` (records skipped
        as longer than ``sft.max_length``, by split; empty when none were).
    """
    resume = last_checkpoint(output_dir)
    notes: dict[str, str] = {}
    trainer = build_sft_trainer(params, data_dir, output_dir, report_to, notes)
    for note in notes.values():
        logger.warning("sft: %s", note)
    final = output_dir / FINAL_DIR
    done = finished_state(resume, final, trainer.args.max_steps)
    if done is not None:  # reached its budget before: keep final as it is (resuming would train one more step)
        return {"train_loss": last_logged(done, "train_loss"), "eval_loss": last_logged(done, "eval_loss"),
                "global_step": int(done["global_step"]), "resumed_from": str(resume), "final_dir": str(final),
                "notes": notes}
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    eval_loss = trainer.evaluate()["eval_loss"] if trainer.eval_dataset is not None else math.nan
    save_policy(trainer, final)
    save_log_history(trainer, final)
    return {"train_loss": float(result.training_loss), "eval_loss": float(eval_loss),
            "global_step": int(trainer.state.global_step), "resumed_from": str(resume) if resume else None,
            "final_dir": str(final), "notes": notes}


def main(argv: list[str]) -> None:
    params = load_params(argv[0] if argv else "params.yaml")
    data_dir = Path(argv[1] if len(argv) > 1 else "data")
    output_dir = Path(argv[2] if len(argv) > 2 else "checkpoints/sft")
    print(run_sft(params, data_dir, output_dir, report_to=[]))


if __name__ == "__main__":
    main(sys.argv[1:])
