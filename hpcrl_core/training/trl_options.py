"""Checks of a stage's ``trl`` passthrough: every key must be a field of the TRL config class, and not one the
stage's own params already own (a second way to set a knob would be ambiguous).

Test: ``pytest tests/training/test_sft.py tests/training/test_rl.py``.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

import torch

from hpcrl_core.errors import ConfigError


def check_passthrough(options: dict[str, Any], config_cls: type, section: str, owned: dict[str, str]) -> None:
    """Raise unless every key of ``options`` is an init field of ``config_cls`` and not in ``owned``.

    Args:
        options: the ``<section>.trl`` mapping from params.yaml.
        config_cls: TRL's config dataclass (SFTConfig, GRPOConfig).
        section: the params section, for messages (``sft``, ``rl_dgemm``).
        owned: field name -> where to set it instead.

    Raises:
        ConfigError: listing unknown names (with close matches) and names to set elsewhere.
    """
    fields = {f.name for f in dataclasses.fields(config_cls) if f.init}
    name = config_cls.__name__
    problems = [f"{section}.trl.{k}: not a field of {name} in trl {trl_version()}{_did_you_mean(k, fields)}; the "
                f"allowed names are {name}'s fields" for k in options if k not in fields]
    problems += [f"{section}.trl.{k}: owned by the {section} stage; set it through {owned[k]}"
                 for k in options if k in owned]
    if problems:
        raise ConfigError(f"{section}.trl: invalid {name} passthrough", problems)


def _did_you_mean(name: str, fields: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(fields), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def trl_version() -> str:
    import trl

    return str(trl.__version__)


def device_options() -> dict[str, Any]:
    """The device settings every stage's TRL config shares: CPU unless CUDA is there, bf16 only on a CUDA device
    that supports it, no dataloader workers (data are tokenized up front; 2-core hosts), pinned memory on CUDA."""
    cuda = torch.cuda.is_available()
    return {"use_cpu": not cuda, "bf16": cuda and torch.cuda.is_bf16_supported(), "dataloader_num_workers": 0,
            "dataloader_pin_memory": cuda}


def grpo_options(rp: Any, output_dir: Path, report_to: list[str], seed: int) -> dict[str, Any]:
    """The GRPOConfig options the RL sections share (``rl_dgemm``, ``rl_hargo``: same field names), with
    steps-based saving, ``seed`` for model and data order and ``device_options``."""
    return {
        "output_dir": str(output_dir), "report_to": report_to, "seed": seed, "data_seed": seed,
        "max_steps": rp.max_steps, "learning_rate": rp.learning_rate, "lr_scheduler_type": rp.lr_scheduler_type,
        "warmup_steps": rp.warmup_ratio, "per_device_train_batch_size": rp.per_device_train_batch_size,
        "num_generations": rp.num_generations, "gradient_accumulation_steps": rp.gradient_accumulation_steps,
        "temperature": rp.temperature, "beta": rp.beta, "max_completion_length": rp.max_completion_length,
        "save_strategy": "steps", "save_steps": rp.save_steps, "save_total_limit": rp.save_total_limit,
        "logging_steps": rp.logging_steps, **device_options(),
    }
