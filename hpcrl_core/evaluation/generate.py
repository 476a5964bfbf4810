"""Batched, seeded text generation from chat prompts on CPU (what the evaluation runner samples with).

Prompts are rendered with the tokenizer's chat template (``add_generation_prompt=True``), left-padded so every row
of a batch ends where its answer starts, and generated greedily (``temperature == 0``) or by sampling. Only the new
tokens are decoded, cut at the first eos (``<|im_end|>`` for the tiny model's tokenizer).

Long inputs, one rule: a prompt fits when its tokens plus ``max_new_tokens`` are within the model's positions
(``max_position_embeddings``). ``too_long`` finds the prompts that do not; the evaluations skip those items before
they generate and count them in their reports (``fitting_records``), the RL stages drop those prompts from their
prompt sets with a count in the log (``fitting_prompt_rows``; the SFT stage applies the same rule with
``sft.max_length``, ``training/sft_data.py``); ``generate`` refuses a prompt that does not fit with a ``DataError``
rather than letting the model run past its positions. A batch holds at most ``batch_size``
prompts and at most ``max_batch_tokens`` rows x (its longest prompt + ``max_new_tokens``) tokens, in prompt order,
so one long prompt generates alone instead of multiplying the memory of a whole batch.

Run: ``.venv/bin/python -m hpcrl_core.evaluation.runner --help`` (the runner calls ``generate``).
Test: ``pytest tests/evaluation/test_runner.py -k generate``, ``pytest tests/evaluation/test_generate.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import torch
from datasets import Dataset
from transformers import LogitsProcessorList, PretrainedConfig, PreTrainedTokenizerBase

from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.openings import OpeningVocabulary

logger = logging.getLogger(__name__)

GenerateProgress = Callable[[int, int], None]  # (prompts done, prompts in all)
MAX_BATCH_TOKENS = 65_536  # rows x (longest prompt + new tokens) per generate() call


def position_limit(model: Any) -> int | None:
    """The most tokens (prompt + answer) the model takes: its config's ``max_position_embeddings``, None when the
    config names none. ``model`` may also be the config itself (``saved.load_saved_config``)."""
    config = model if isinstance(model, PretrainedConfig) else getattr(model, "config", None)
    text = config.get_text_config() if config is not None and hasattr(config, "get_text_config") else config
    limit = getattr(text, "max_position_embeddings", None)
    return int(limit) if isinstance(limit, int) and limit > 0 else None


def render_prompts(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[list[dict[str, str]]]) -> list[str]:
    """Each chat prompt as the text the model reads, ending where its answer begins."""
    return [str(tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)) for p in prompts]


def prompt_lengths(tokenizer: PreTrainedTokenizerBase, prompts: Sequence[list[dict[str, str]]]) -> list[int]:
    """Tokens of each rendered prompt."""
    if not prompts:
        return []
    return [len(ids) for ids in tokenizer(render_prompts(tokenizer, prompts), add_special_tokens=False)["input_ids"]]


def too_long(model: Any, tokenizer: PreTrainedTokenizerBase, prompts: Sequence[list[dict[str, str]]],
             max_new_tokens: int) -> list[int]:
    """Indices of the prompts whose tokens plus ``max_new_tokens`` exceed the model's positions (none without a
    limit)."""
    limit = position_limit(model)
    if limit is None:
        return []
    return [i for i, n in enumerate(prompt_lengths(tokenizer, prompts)) if n + max_new_tokens > limit]


def fitting_records(model: Any, tokenizer: PreTrainedTokenizerBase, records: Sequence[Any], max_new_tokens: int,
                    notes: dict[str, str], key: str = "too_long") -> list[Any]:
    """``records`` (anything with a chat ``prompt``) without those ``too_long`` finds; when it drops some,
    ``notes[key]`` says how many, why and which (the first five ids)."""
    over = set(too_long(model, tokenizer, [r.prompt for r in records], max_new_tokens))
    if over:
        ids = [str(getattr(records[i], "id", i)) for i in sorted(over)]
        more = ", ..." if len(ids) > 5 else ""
        notes[key] = (f"{len(over)} of {len(records)} items skipped: prompt + {max_new_tokens} new tokens exceed the "
                      f"model's {position_limit(model)} positions ({', '.join(ids[:5])}{more})")
    return [r for i, r in enumerate(records) if i not in over]


def fitting_prompt_rows(dataset: Dataset, model: Any, tokenizer: PreTrainedTokenizerBase, max_completion_length: int,
                        section: str) -> Dataset:
    """``dataset`` (rows with a chat ``prompt``, an RL stage's prompt set) without the prompts that leave no room
    for ``max_completion_length`` new tokens in the model's positions: skipped, with a count in the log.

    Raises:
        DataError: no prompt fits.
    """
    over = set(too_long(model, tokenizer, dataset["prompt"], max_completion_length))
    if not over:
        return dataset
    if len(over) == len(dataset):
        raise DataError(f"{section}: none of the {len(dataset)} prompts leaves room for max_completion_length="
                        f"{max_completion_length} tokens in the model's {position_limit(model)} positions")
    logger.warning("%s: %d of %d prompts skipped: prompt + %d new tokens exceed the model's %s positions", section,
                   len(over), len(dataset), max_completion_length, position_limit(model))
    return dataset.select([i for i in range(len(dataset)) if i not in over])


def token_batches(lengths: Sequence[int], batch_size: int, max_new_tokens: int, rows_per_prompt: int,
                  max_batch_tokens: int) -> list[range]:
    """Consecutive batches of prompt indices: at most ``batch_size`` prompts, and at most ``max_batch_tokens``
    rows x (longest prompt + ``max_new_tokens``) tokens, unless one prompt alone is above it (it goes alone)."""
    batches: list[range] = []
    start = 0
    while start < len(lengths):
        end, longest = start + 1, lengths[start]
        while end < len(lengths) and end - start < batch_size:
            wider = max(longest, lengths[end])
            if (end - start + 1) * rows_per_prompt * (wider + max_new_tokens) > max_batch_tokens:
                break
            end, longest = end + 1, wider
        batches.append(range(start, end))
        start = end
    return batches


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
                    options: dict[str, Any], openings: OpeningVocabulary | None = None,
                    opening: str = "") -> list[str]:
    """Generate for one batch of rendered prompts; returns ``len(texts) * num_return_sequences`` answers, grouped
    by prompt (the first R answers belong to the first prompt). With ``openings`` each answer, after ``opening``
    (already at the end of each text), is held to open with one of them."""
    saved = tokenizer.padding_side
    tokenizer.padding_side = "left"  # rows must end at the generation point; right padding would put pads there
    try:
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    finally:
        tokenizer.padding_side = saved
    if openings is not None:
        options = {**options, "logits_processor": LogitsProcessorList([openings.processor(opening)])}
    out = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         eos_token_id=stops, **options)  # (B * R, T_in + T_new)
    prompt_len = batch["input_ids"].shape[1]
    return [_decode(tokenizer, row[prompt_len:], stops) for row in out]


def generate(model: Any, tokenizer: PreTrainedTokenizerBase, prompts: list[list[dict[str, str]]], *,
             temperature: float, max_new_tokens: int, num_return_sequences: int = 1, batch_size: int = 8,
             seed: int = 0, progress: GenerateProgress | None = None,
             max_batch_tokens: int = MAX_BATCH_TOKENS, opening: str = "",
             openings: OpeningVocabulary | None = None) -> list[list[str]]:
    """Answers of a causal LM to chat prompts.

    Args:
        model: a causal LM (``PreTrainedModel`` or ``PeftModel``) on CPU; put in eval mode here.
        tokenizer: its tokenizer, with a chat template and an eos token (a pad token too, else eos pads).
        prompts: chat conversations (lists of ``{"role", "content"}``) without the assistant's answer.
        temperature: 0 for greedy decoding, else the sampling temperature.
        max_new_tokens: the most tokens generated per answer.
        num_return_sequences: answers per prompt (R).
        batch_size: prompts per ``model.generate`` call at most (each yields R rows).
        seed: the same seed, prompts and batch sizes give the same answers; the global RNG state is restored.
        progress: called with (prompts done, prompts in all) after each batch.
        max_batch_tokens: the most rows x (longest prompt + ``max_new_tokens``) tokens of one call.
        opening: text every answer opens with, given instead of sampled (appended to each rendered prompt; for
            DGEMM the code fence, ``evaluate.dgemm_fence_given``); its tokens count within ``max_new_tokens``.
        openings: with it, each answer (``opening`` included) is held to open with one of its texts
            (``evaluation/openings.py``; for DGEMM the corpus's plan lines, ``evaluate.dgemm_plan_vocabulary``).

    Returns:
        One list of R answers per prompt, in prompt order, each ``opening`` and the decoded new tokens before the
        first eos.

    Raises:
        ValueError: ``temperature < 0``, or ``max_new_tokens``, ``num_return_sequences``, ``batch_size`` or
            ``max_batch_tokens`` below 1, or an ``opening`` that leaves no new token.
        DataError: a prompt does not fit the model's positions with ``max_new_tokens`` (``too_long``; the
            evaluations skip such items first).
    """
    if temperature < 0 or min(max_new_tokens, num_return_sequences, batch_size, max_batch_tokens) < 1:
        raise ValueError(f"generate: temperature={temperature} must be >= 0 and max_new_tokens={max_new_tokens}, "
                         f"num_return_sequences={num_return_sequences}, batch_size={batch_size}, "
                         f"max_batch_tokens={max_batch_tokens} must be >= 1")
    given = len(tokenizer(opening, add_special_tokens=False)["input_ids"]) if opening else 0
    if given >= max_new_tokens:
        raise ValueError(f"generate: the opening {opening!r} is {given} tokens, which leaves none of "
                         f"max_new_tokens={max_new_tokens} to generate")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    options: dict[str, Any] = {"max_new_tokens": max_new_tokens - given, "num_return_sequences": num_return_sequences,
                               "pad_token_id": tokenizer.pad_token_id}
    if temperature > 0:
        options |= {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0}
    else:
        options |= {"do_sample": False}
    texts = [text + opening for text in render_prompts(tokenizer, prompts)]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []
    limit = position_limit(model)
    over = [i for i, n in enumerate(lengths) if limit is not None and n - given + max_new_tokens > limit]
    if over:
        raise DataError(f"generate: {len(over)} of {len(texts)} prompts do not fit the model's {limit} positions with "
                        f"{max_new_tokens} new tokens (the longest has {max(lengths[i] for i in over)} tokens; first "
                        f"at index {over[0]}); skip them first (evaluation.generate.too_long)")
    stops = _stop_ids(model, tokenizer)
    model.eval()
    answers: list[list[str]] = []
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        for batch in token_batches(lengths, batch_size, max_new_tokens, num_return_sequences, max_batch_tokens):
            flat = _generate_batch(model, tokenizer, [texts[i] for i in batch], stops, options, openings, opening)
            answers += [[opening + a for a in flat[i:i + num_return_sequences]]
                        for i in range(0, len(flat), num_return_sequences)]
            if progress:
                progress(len(answers), len(texts))
    return answers
