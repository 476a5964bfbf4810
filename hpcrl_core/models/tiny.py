"""Our own small Qwen2-architecture causal LM, randomly initialised for training from scratch (``model.source: tiny``).

The defaults in params.yaml (hidden 256, 4 layers, 4 heads, intermediate 768, tied embeddings) give 4.46M parameters
with a 4096-token vocabulary: 3.41M in the layers plus the 4096 x 256 embedding shared with the output head. See the
ENVIRONMENT notes for what such a model reaches on the DGEMM corpus.

Run: ``python -m hpcrl_core.models.build`` prints the size of the policy that params.yaml describes.

Test: ``pytest tests/models/test_tiny.py``.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM

from hpcrl_core.config import TinyModelParams
from hpcrl_core.errors import ConfigError


def tiny_config(params: TinyModelParams, tokenizer: PreTrainedTokenizerBase) -> Qwen2Config:
    """The Qwen2 configuration: sizes from params, vocabulary and special token ids from the tokenizer.

    Raises:
        ConfigError: the tokenizer lacks an eos or pad token (the chat template's ``<|im_end|>`` and a pad).
    """
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise ConfigError(f"the tiny model's tokenizer needs eos and pad tokens (eos {tokenizer.eos_token!r}, pad "
                          f"{tokenizer.pad_token!r}); use one made by hpcrl_core.models.tokenizer.train_tokenizer")
    return Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=params.hidden_size,
        intermediate_size=params.intermediate_size,
        num_hidden_layers=params.num_layers,
        num_attention_heads=params.num_heads,
        num_key_value_heads=params.num_kv_heads,
        max_position_embeddings=params.max_position_embeddings,
        tie_word_embeddings=params.tie_word_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": params.rope_theta},
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )


def build_tiny_model(params: TinyModelParams, tokenizer: PreTrainedTokenizerBase, seed: int = 0) -> Qwen2ForCausalLM:
    """A randomly initialised Qwen2ForCausalLM (float32) sized by ``params`` for ``tokenizer``.

    Args:
        params: ``model.tiny``.
        tokenizer: its length is the vocabulary; its eos (``<|im_end|>``) stops generation, its pad pads.
        seed: the same seed gives the same weights; the global torch RNG is left as it was.

    Returns:
        The model in train mode; ``generation_config`` carries the tokenizer's eos and pad ids.
    """
    config = tiny_config(params, tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    """Number of distinct parameters (tied weights counted once)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)
