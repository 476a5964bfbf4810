"""The SFT stage's data: prepared ``data/<family>/{train,eval}.jsonl`` → TRL prompt-completion datasets.

Only the ``prompt`` and ``completion`` columns reach the trainer (TRL's conversational prompt-completion format:
loss on the completion only); ``answer``, ``metadata`` and ``provenance`` are for rewards and metrics, not SFT.
Records with an empty completion are skipped. Only ``train.jsonl`` and ``eval.jsonl`` are read, never the DGEMM
``problems_*.jsonl`` files (prompts without a completion, for RL).

Long records follow the project's one rule for inputs longer than the model may take (docs/models.md): they are
skipped, with a count. ``fitting_rows`` measures prompt + completion as TRL tokenizes it and drops the records above
``sft.max_length`` before training, with a note saying how many and how long (TRL would otherwise truncate them,
or drop them once the completion is cut off entirely, without a word); no record left to train on is a
``ConfigError``.

Test: ``pytest tests/training/test_sft.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset
from transformers import PreTrainedTokenizerBase

from hpcrl_core.data.schema import read_jsonl
from hpcrl_core.errors import ConfigError, DataError

SPLITS: tuple[str, ...] = ("train", "eval")


def _split_rows(data_dir: Path, families: Sequence[str], split: str,
                repeats: Mapping[str, int] | None = None) -> list[dict[str, list[dict[str, str]]]]:
    """Prompt-completion rows of one split over ``families``, in family order; empty completions skipped; a
    family's rows ``repeats[family]`` times (default once)."""
    rows = []
    for family in families:
        path = data_dir / family / f"{split}.jsonl"
        if not path.is_file():
            raise DataError(f"{path}: no such data file (family {family!r}, split {split!r}); run "
                            f"`dvc repro prepare` first, or remove {family!r} from sft.families")
        family_rows = [{"prompt": r.prompt, "completion": r.completion} for r in read_jsonl(path)
                       if r.completion and r.response.strip()]
        rows += family_rows * (repeats or {}).get(family, 1)
    return rows


def load_sft_datasets(data_dir: Path, families: Sequence[str], seed: int = 0,
                      repeats: Mapping[str, int] | None = None) -> tuple[Dataset, Dataset]:
    """Train and eval datasets for SFT: the families concatenated, then shuffled with ``seed``.

    Args:
        data_dir: the prepared data folder (``data/``).
        families: family names (``sft.families``).
        seed: shuffling seed.
        repeats: family -> how many times its train records appear per epoch (``sft.repeats``; default once);
            eval records always appear once.

    Returns:
        (train, eval), each with exactly the columns ``prompt`` and ``completion`` (chat message lists).
        ``eval`` may be empty (no family has eval records with a completion).

    Raises:
        DataError: a family's ``train.jsonl`` or ``eval.jsonl`` is missing or malformed, or no train record has
            a completion.
    """
    train_rows = _split_rows(data_dir, families, "train", repeats)
    eval_rows = _split_rows(data_dir, families, "eval")
    if not train_rows:
        raise DataError(f"{data_dir}: no train record with a non-empty completion in families {list(families)}; "
                        f"check the prepare stage's output (data/<family>/card.md)")
    train = Dataset.from_list(train_rows).shuffle(seed=seed).flatten_indices()
    evaluation = Dataset.from_list(eval_rows).shuffle(seed=seed).flatten_indices() if eval_rows else Dataset.from_dict(
        {"prompt": [], "completion": []})
    return train, evaluation


def record_tokens(prompt: list[dict[str, str]], completion: list[dict[str, str]],
                  tokenizer: PreTrainedTokenizerBase) -> int:
    """Tokens of prompt + completion rendered by the chat template, as TRL's SFTTrainer tokenizes them."""
    rendered: Any = tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)
    return len(rendered["input_ids"])


def record_ids(prompt: list[dict[str, str]], completion: list[dict[str, str]],
               tokenizer: PreTrainedTokenizerBase) -> tuple[list[int], list[int]]:
    """Token ids of prompt + completion rendered by the chat template, as TRL's SFTTrainer tokenizes them, and those
    of the prompt alone with its generation prompt (the completion's tokens follow them)."""
    rendered: Any = tokenizer.apply_chat_template(prompt + completion, tokenize=True, return_dict=True)
    opening: Any = tokenizer.apply_chat_template(prompt, tokenize=True, return_dict=True, add_generation_prompt=True)
    return list(rendered["input_ids"]), list(opening["input_ids"])


def mean_completion_tokens(dataset: Dataset, tokenizer: PreTrainedTokenizerBase) -> float:
    """Mean tokens of a record's completion (record minus its prompt with the generation prompt), at least 1."""
    if not len(dataset):
        return 1.0
    total = 0
    for row in dataset:
        ids, prompt = record_ids(row["prompt"], row["completion"], tokenizer)
        total += len(ids) - len(prompt)
    return max(total / len(dataset), 1.0)


def longest_record_tokens(dataset: Dataset, tokenizer: PreTrainedTokenizerBase) -> int:
    """The longest record of a prompt-completion dataset in tokens (0 for an empty dataset)."""
    return max((record_tokens(row["prompt"], row["completion"], tokenizer) for row in dataset), default=0)


def fitting_rows(max_length: int, dataset: Dataset, tokenizer: PreTrainedTokenizerBase, split: str,
                 notes: dict[str, str]) -> Dataset:
    """``dataset`` without its records longer than ``max_length`` tokens (prompt + completion); when it drops some,
    ``notes[f"{split}_too_long"]`` says how many of how many and the longest length."""
    lengths = [record_tokens(row["prompt"], row["completion"], tokenizer) for row in dataset]
    keep = [i for i, n in enumerate(lengths) if n <= max_length]
    if len(keep) == len(lengths):
        return dataset
    notes[f"{split}_too_long"] = (f"{len(lengths) - len(keep)} of {len(lengths)} {split} records skipped: longer "
                                  f"than sft.max_length={max_length} tokens (longest {max(lengths)})")
    return dataset.select(keep)


def fitting_datasets(max_length: int, train: Dataset, evaluation: Dataset, tokenizer: PreTrainedTokenizerBase,
                     notes: dict[str, str]) -> tuple[Dataset, Dataset]:
    """Both splits through ``fitting_rows``.

    Raises:
        ConfigError: every train record is longer than ``max_length``.
    """
    kept = fitting_rows(max_length, train, tokenizer, "train", notes)
    if len(train) and not len(kept):
        shortest = min(record_tokens(row["prompt"], row["completion"], tokenizer) for row in train)
        raise ConfigError(f"sft.max_length: received {max_length}, but every train record is longer (the shortest "
                          f"is {shortest} tokens); raise sft.max_length")
    return kept, fitting_rows(max_length, evaluation, tokenizer, "eval", notes)
