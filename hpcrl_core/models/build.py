"""Load the policy a stage trains: ``model`` params → (model, tokenizer), with every check done before training.

``model.source: tiny`` trains (or loads, ``model.tokenizer.path``) a tokenizer and builds a randomly initialised
Qwen2; ``hf`` loads a local pretrained folder. Both then take the same path: tokenizer/model agreement checks, pad
and eos wiring, and optional LoRA. Any problem is a ``ConfigError`` (or ``DataError`` for missing data) raised here,
never halfway through a training run.

Run: ``python -m hpcrl_core.models.build [PARAMS] [DATA_DIR]`` prints the policy's size and special tokens.
Test: ``pytest tests/models``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from peft import PeftModel
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from hpcrl_core.config import ModelParams, TokenizerParams, load_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.hf import load_hf_model
from hpcrl_core.models.lora import apply_lora
from hpcrl_core.models.tiny import build_tiny_model, count_parameters
from hpcrl_core.models.tokenizer import load_tokenizer, save_tokenizer, texts_from_data, train_tokenizer

Policy = tuple[PreTrainedModel | PeftModel, PreTrainedTokenizerBase]


def tiny_tokenizer(tp: TokenizerParams, data_dir: Path, tokenizer_dir: Path | None = None) -> PreTrainedTokenizerBase:
    """The tiny model's tokenizer: loaded from ``tp.path``, else trained on ``data_dir`` (and saved to
    ``tokenizer_dir`` when given, so the checkpoint carries it).

    Raises:
        ConfigError: ``model.tokenizer.path`` is set but missing or unloadable.
        DataError: no ``train.jsonl`` under ``data_dir`` to train on.
    """
    if tp.path:
        return load_tokenizer(Path(tp.path), key="model.tokenizer.path")
    tokenizer = train_tokenizer(texts_from_data(data_dir), tp.vocab_size, tp.min_frequency)
    if tokenizer_dir is not None:
        save_tokenizer(tokenizer, tokenizer_dir)
    return tokenizer


def finish_pair(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, source: str) -> None:
    """Checks and wiring shared by both sources, in place: chat template, eos, pad, vocabulary fits the embeddings.

    A tokenizer without a pad token pads with its eos (as TRL would); generation stops at the tokenizer's eos.

    Raises:
        ConfigError: no chat template, no eos token, or token ids beyond the model's embedding matrix.
    """
    where = "model.hf.path" if source == "hf" else "model.tokenizer"
    if not tokenizer.chat_template:
        raise ConfigError(f"{where}: the tokenizer has no chat template, but the data are chat messages; use an "
                          f"instruct model's folder or a tokenizer made by train_tokenizer")
    if tokenizer.eos_token_id is None:
        raise ConfigError(f"{where}: the tokenizer has no eos token, so generation could never stop; set one in "
                          f"its tokenizer_config.json")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    weight = model.get_input_embeddings().weight
    assert isinstance(weight, torch.Tensor)
    if len(tokenizer) > weight.shape[0]:
        raise ConfigError(f"{where}: the tokenizer has {len(tokenizer)} tokens but the model embeds only "
                          f"{weight.shape[0]}; use the tokenizer saved with this model")
    model.config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    # Keep a model's own stop tokens (an instruct model may list several) and add the tokenizer's eos.
    eos = model.generation_config.eos_token_id
    stops = [] if eos is None else list(eos) if isinstance(eos, list) else [eos]
    if tokenizer.eos_token_id not in stops:
        stops.insert(0, tokenizer.eos_token_id)
        model.generation_config.eos_token_id = stops[0] if len(stops) == 1 else stops

def load_policy(mp: ModelParams, data_dir: Path, tokenizer_dir: Path | None = None, seed: int = 0) -> Policy:
    """The policy and its tokenizer for ``model`` params.

    Args:
        mp: the ``model`` section.
        data_dir: prepared data (``data/``); the tiny tokenizer trains on its ``*/train.jsonl``.
        tokenizer_dir: where a newly trained tiny tokenizer is saved; None keeps it in memory only.
        seed: the tiny model's initialisation seed.

    Returns:
        (model, tokenizer); the model is a PeftModel when ``mp.lora.enabled``.

    Raises:
        ConfigError: a missing or unusable path, or a LoRA target the model lacks.
        DataError: no prepared data to train the tiny tokenizer on.
    """
    if mp.source == "tiny":
        tokenizer = tiny_tokenizer(mp.tokenizer, data_dir, tokenizer_dir)
        model: PreTrainedModel = build_tiny_model(mp.tiny, tokenizer, seed)
    else:
        model, tokenizer = load_hf_model(mp.hf)
    finish_pair(model, tokenizer, mp.source)
    if mp.lora.enabled:
        return apply_lora(model, mp.lora), tokenizer
    return model, tokenizer


def main(argv: list[str]) -> None:
    params = load_params(argv[0] if argv else "params.yaml")
    model, tokenizer = load_policy(params.model, Path(argv[1] if len(argv) > 1 else "data"))
    print(f"{type(model).__name__}: {count_parameters(model):,} parameters "
          f"({count_parameters(model, trainable_only=True):,} trainable); vocabulary {len(tokenizer)}; "
          f"eos {tokenizer.eos_token!r}; pad {tokenizer.pad_token!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
