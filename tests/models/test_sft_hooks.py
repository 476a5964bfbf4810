"""Guard of what the SFT stage relies on in TRL's SFTTrainer (trl pinned in pyproject.toml): it takes our tokenizer
and tiny model with conversational prompt-completion records, derives completion-only loss from the prompt /
completion split, and that split lands exactly where the rendered prompt ends.

Run: pytest tests/models/test_sft_hooks.py
"""

from __future__ import annotations

import math
from pathlib import Path

from datasets import Dataset
from trl import SFTConfig, SFTTrainer

from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.models.tokenizer import train_tokenizer
from tests.models import TINY, dgemm_records, qa_records, sample_texts


def test_sft_trainer_runs_one_completion_only_step(tmp_path: Path) -> None:
    tok = train_tokenizer(sample_texts(), vocab_size=800, min_frequency=2)
    model = build_tiny_model(TINY, tok)
    records = [*dgemm_records()[:2], *qa_records()[:2]]
    dataset = Dataset.from_list([{"prompt": r.prompt, "completion": r.completion} for r in records])
    args = SFTConfig(output_dir=str(tmp_path), max_steps=1, use_cpu=True, bf16=False, report_to=[],
                     per_device_train_batch_size=2, save_strategy="no", logging_steps=1, max_length=None)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tok)

    assert trainer.completion_only_loss  # inferred from the "prompt" and "completion" columns
    for record, row in zip(records, trainer.train_dataset, strict=True):
        prompt_ids = tok.apply_chat_template(record.prompt, add_generation_prompt=True, return_dict=True)["input_ids"]
        labels, n = row["labels"], len(prompt_ids)
        # TRL folds its completion mask into labels (-100 = no loss). Loss must start right after
        # "<|im_start|>assistant\n": TRL found the whole rendered prompt as a token prefix.
        assert row["input_ids"][:n] == prompt_ids
        assert all(t == -100 for t in labels[:n]) and labels[n:] == row["input_ids"][n:]
        assert tok.decode(labels[n:]) == record.response + "<|im_end|>\n"

    result = trainer.train()
    assert trainer.state.global_step == 1
    assert math.isfinite(result.training_loss) and result.training_loss > 0
