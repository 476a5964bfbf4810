"""The SFT anchor of the ``rl_dgemm`` stage: a supervised loss on the SFT data's DGEMM kernels, added to RL's loss.

RL's KL term (``rl_dgemm.beta``) holds the policy near its SFT start on the completions RL samples, for the prompts
RL trains on. What RL never samples is held by nothing: over 3 x 2 seeds, one run in three wrote its chosen vector
tile with an accumulator declared twice, or a scalar body under a vector tile's plan line, on permitted sets no
train prompt has, which its SFT start wrote right (docs/experiments.md, "The KL to the SFT start"). The anchor
keeps the corpus's own text likely: each optimizer step it adds ``rl_dgemm.sft_anchor`` (gamma) times the mean
negative log-likelihood per completion token of ``rl_dgemm.sft_anchor_batch`` records of
``data/dgemm/train.jsonl`` (the SFT records: every corpus kernel under the prompts it was paired with), as
pretraining mixes do in RLHF (InstructGPT's "PPO-ptx"). The records' plan lines are a few tokens and their bodies
hundreds, so the anchor weighs mostly how a chosen design is written, and little which design is chosen, which is
RL's to move. Our design; docs/sqd.md, "The SFT anchor".

Each draw depends on (``rl_dgemm.seed``, optimizer step, micro-batch) alone, so a resumed run draws what the
uninterrupted one would have. Records longer than ``sft.max_length`` tokens (which SFT skipped too) are left out.

Test: ``pytest tests/training/test_rl_anchor.py``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from hpcrl_core.data.schema import read_jsonl
from hpcrl_core.errors import DataError
from hpcrl_core.training.sft_data import record_ids

IGNORE = -100  # label of the prompt and padding positions: no loss there


@dataclass(frozen=True)
class AnchorRecord:
    """One SFT record as token ids: ``ids`` (prompt with the generation prompt, then the completion) and ``prompt``,
    the length of the prompt part."""

    ids: tuple[int, ...]
    prompt: int


def anchor_records(path: Path, tokenizer: PreTrainedTokenizerBase, max_length: int) -> list[AnchorRecord]:
    """The SFT records of ``path`` (a ``train.jsonl``) tokenized as TRL's SFTTrainer renders them, those longer
    than ``max_length`` tokens left out.

    Raises:
        DataError: the file is missing or malformed, holds no record with a completion, none fits, or the chat
            template renders a record whose prompt is not a prefix of the whole (the completion could not be told
            from the prompt).
    """
    out = []
    for record in read_jsonl(path):
        if not record.completion or not record.response.strip():
            continue
        ids, prompt = record_ids(record.prompt, record.completion, tokenizer)
        if len(ids) <= len(prompt) or ids[: len(prompt)] != prompt:
            raise DataError(f"{path}: the chat template renders record {record.id!r} so that its prompt is not a "
                            "prefix of prompt + completion; the anchor cannot tell the completion's tokens apart")
        if len(ids) <= max_length:
            out.append(AnchorRecord(tuple(ids), len(prompt)))
    if not out:
        raise DataError(f"{path}: no SFT record with a completion of at most {max_length} tokens (sft.max_length) "
                        "for rl_dgemm.sft_anchor; run `dvc repro prepare` or set rl_dgemm.sft_anchor: 0")
    return out


class SFTAnchor:
    """``weight`` times the mean token NLL of ``batch`` records drawn per micro-batch (see module)."""

    def __init__(self, records: Sequence[AnchorRecord], weight: float, batch: int, seed: int, pad_id: int) -> None:
        if not records:
            raise DataError("the SFT anchor needs at least one record")
        if weight <= 0 or batch < 1:
            raise ValueError(f"SFTAnchor: weight must be > 0 and batch >= 1, got {weight} and {batch}")
        self.records, self.weight, self.batch, self.seed, self.pad_id = list(records), weight, batch, seed, pad_id

    def draw(self, step: int, micro: int = 0) -> list[int]:
        """Indices of the records of optimizer step ``step``'s micro-batch ``micro``: from (seed, step, micro)
        alone; without repetition within a draw unless the data holds fewer records than a batch."""
        rng = random.Random(f"sft-anchor:{self.seed}:{step}:{micro}")
        if len(self.records) >= self.batch:
            return rng.sample(range(len(self.records)), self.batch)
        return [rng.randrange(len(self.records)) for _ in range(self.batch)]

    def batch_tensors(self, indices: Sequence[int], device: torch.device | str = "cpu"
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input_ids, attention_mask, labels) of the drawn records, right-padded; labels are ``IGNORE`` on each
        record's prompt and on padding."""
        rows = [self.records[i] for i in indices]
        width = max(len(r.ids) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, : len(r.ids)] = torch.tensor(r.ids)
            mask[b, : len(r.ids)] = 1
            labels[b, r.prompt: len(r.ids)] = torch.tensor(r.ids[r.prompt:])
        return ids.to(device), mask.to(device), labels.to(device)

    def nll(self, model: Any, step: int, micro: int = 0) -> torch.Tensor:
        """The mean negative log-likelihood per completion token of this micro-batch's records under ``model``
        (with its gradient)."""
        device = next(model.parameters()).device
        ids, mask, labels = self.batch_tensors(self.draw(step, micro), device)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1, :]
        target = labels[:, 1:]
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), target.reshape(-1),
                                                 ignore_index=IGNORE)
