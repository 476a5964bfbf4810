"""Batched, seeded text generation from chat prompts on CPU (what the evaluation runner samples with).

Prompts are rendered with the tokenizer's chat template (``add_generation_prompt=True``), left-padded so every row
of a batch ends where its answer starts, and generated greedily (``temperature == 0``) or by sampling. Only the new
tokens are decoded, cut at the first eos (``<|im_end|>`` for the tiny model's tokenizer).

Run: ``.venv/bin/python -m hpcrl_core.evaluation.runner --help`` (the runner calls ``generate``).
Test: ``pytest tests/evaluation/test_runner.py -k generate``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

GenerateProgress = Callable[[int, int], None]  # (prompts done, prompts in all)


def _stop_ids(model: Any, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """Token ids that end an answer: the tokenizer's eos plus any the model's generation config lists."""
    eos = model.generation_config.eos_token_id
    ids = [] if eos is None else list(eos) if isinstance(eos, list) else [eos]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.insert(0, tokenizer.eos_token_id)
    return ids


def _decode(tokenizer: PreTrainedTokenizerBase, new_tokens: torch.Tensor, stops: Sequence[int]) -> str:
    """The text of one row of new tokens (shape ``(T_new,)``), cut before the first stop token."""
    ids = new_tokens.tolist()
    cut = next((i for i, t in enumerate(ids) if t in stops), len(ids))
    return str(tokenizer.decode(ids[:cut], skip_special_tokens=True))


def _generate_batch(model: Any, tokenizer: PreTrainedTokenizerBase, texts: list[str], stops: list[int],
                    options: dict[str, Any]) -> list[str]:
    """Generate for one batch of rendered prompts; returns ``len(texts) * num_return_sequences`` answers, grouped
    by prompt (the first R answers belong to the first prompt)."""
    saved = tokenizer.padding_side
    tokenizer.padding_side = "left"  # rows must end at the generation point; right padding would put pads there
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = saved
    out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         eos_token_id=stops, **options)  # (B * R, T_in + T_new)
    prompt_len = batch["input_ids"].shape[1]
    return [_decode(tokenizer, row[prompt_len:], stops) for row in out]


def generate(model: Any, tokenizer: PreTrainedTokenizerBase, prompts: list[list[dict[str, str]]], *,
             temperature: float, max_new_tokens: int, num_return_sequences: int = 1, batch_size: int = 8,
             seed: int = 0, progress: GenerateProgress | None = None) -> list[list[str]]:
    """Answers of a causal LM to chat prompts.

    Args:
        model: a causal LM (``PreTrainedModel`` or ``PeftModel``) on CPU; put in eval mode here.
        tokenizer: its tokenizer, with a chat template and an eos token (a pad token too, else eos pads).
        prompts: chat conversations (lists of ``{"role", "content"}``) without the assistant's answer.
        temperature: 0 for greedy decoding, else the sampling temperature.
        max_new_tokens: the most tokens generated per answer.
        num_return_sequences: answers per prompt (R).
        batch_size: prompts per ``model.generate`` call (each yields R rows).
        seed: the same seed, prompts and batch size give the same answers; the global RNG state is restored.
        progress: called with (prompts done, prompts in all) after each batch.

    Returns:
        One list of R answers per prompt, in prompt order, each the decoded new tokens before the first eos.

    Raises:
        ValueError: ``temperature < 0``, or ``max_new_tokens``, ``num_return_sequences`` or ``batch_size`` below 1.
    """
    if temperature < 0 or min(max_new_tokens, num_return_sequences, batch_size) < 1:
        raise ValueError(f"generate: temperature={temperature} must be >= 0 and max_new_tokens={max_new_tokens}, "
                         f"num_return_sequences={num_return_sequences}, batch_size={batch_size} must be >= 1")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    options: dict[str, Any] = {"max_new_tokens": max_new_tokens, "num_return_sequences": num_return_sequences,
                               "pad_token_id": tokenizer.pad_token_id}
    if temperature > 0:
        options |= {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
    else:
        options |= {"do_sample": False}
    texts = [str(tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)) for p in prompts]
    stops = _stop_ids(model, tokenizer)
    model.eval()
    answers: list[list[str]] = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for start in range(0, len(texts), batch_size):
            flat = _generate_batch(model, tokenizer, texts[start:start + batch_size], stops, options)
            answers += [flat[i:i + num_return_sequences] for i in range(0, len(flat), num_return_sequences)]
            if progress:
                progress(len(answers), len(texts))
    return answers
