"""Load a policy a stage saved (``checkpoints/<stage>/final``): a full model folder, or a LoRA adapter folder
loaded onto its base model with peft. Local files only; CPU.

Test: ``pytest tests/evaluation/test_runner.py tests/training/test_rl.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import AutoConfig, AutoModelForCausalLM, PretrainedConfig, PreTrainedTokenizerBase

from hpcrl_core.errors import ConfigError
from hpcrl_core.models.tokenizer import load_tokenizer


def load_saved_config(model_dir: Path, key: str = "model_dir") -> tuple[PretrainedConfig, PreTrainedTokenizerBase]:
    """The model config and tokenizer saved in ``model_dir``, without the weights (for an adapter folder, its base
    model's config): enough to measure prompts against the model's positions.

    Raises:
        ConfigError: as ``load_saved_policy``.
    """
    adapter = model_dir / "adapter_config.json"
    if not (model_dir / "config.json").is_file() and not adapter.is_file():
        raise ConfigError(f"{key}: {model_dir} holds no saved model (no config.json or adapter_config.json); "
                          f"pass the folder a stage writes (e.g. checkpoints/sft/final) or run `dvc repro sft`")
    tokenizer = load_tokenizer(model_dir, key=key)
    if (model_dir / "config.json").is_file():
        return AutoConfig.from_pretrained(str(model_dir), local_files_only=True), tokenizer
    from peft import PeftConfig  # only LoRA runs need peft here

    base = PeftConfig.from_pretrained(str(model_dir)).base_model_name_or_path
    return AutoConfig.from_pretrained(str(base), local_files_only=True), tokenizer


def load_saved_policy(model_dir: Path, trainable: bool = False, key: str = "model_dir"
                      ) -> tuple[Any, PreTrainedTokenizerBase]:
    """The model and tokenizer saved in ``model_dir``; in eval mode unless ``trainable``.

    Args:
        model_dir: a folder with config.json (full model) or adapter_config.json (LoRA adapter) and a tokenizer.
        trainable: load adapters as trainable and leave the model in train mode (for a further training stage).
        key: the params key or argument named in error messages.

    Raises:
        ConfigError: the folder is missing, or holds no loadable model or no tokenizer with a chat template.
    """
    adapter = (model_dir / "adapter_config.json").is_file()
    if not (model_dir / "config.json").is_file() and not adapter:
        raise ConfigError(f"{key}: {model_dir} holds no saved model (no config.json or adapter_config.json); "
                          f"pass the folder a stage writes (e.g. checkpoints/sft/final) or run `dvc repro sft`")
    tokenizer = load_tokenizer(model_dir, key=key)
    if adapter:
        from peft import AutoPeftModelForCausalLM  # only LoRA runs need peft here

        model = AutoPeftModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True, is_trainable=trainable)
    else:
        model = AutoModelForCausalLM.from_pretrained(str(model_dir), local_files_only=True)
    model.train(trainable)
    return model, tokenizer
