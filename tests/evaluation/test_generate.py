"""Long inputs in generation (hpcrl_core/evaluation/generate.py): a prompt the model cannot take is found before any
forward pass, skipped with a count by the evaluations, refused by ``generate``; batches are bounded by tokens.

Run: pytest tests/evaluation/test_generate.py
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

import pytest
from datasets import Dataset

from hpcrl_core.data.schema import messages
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.evaluation.generate import (
    fitting_prompt_rows,
    fitting_records,
    generate,
    position_limit,
    prompt_lengths,
    token_batches,
    too_long,
)
from hpcrl_core.models.saved import load_saved_config
from hpcrl_core.models.tiny import build_tiny_model
from tests.models import TINY, sample_tokenizer


@dataclass
class Item:
    id: str
    prompt: list[dict[str, str]]


def test_batches_are_bounded_by_prompts_and_by_tokens() -> None:
    assert token_batches([10, 10, 10, 10], 3, 10, 1, 10_000) == [range(0, 3), range(3, 4)]
    # 2 x (10 + 10) = 40 fits 100; a third row of 500 would not, and 510 alone is above it: it goes alone
    assert token_batches([10, 10, 500, 10], 4, 10, 1, 100) == [range(0, 2), range(2, 3), range(3, 4)]
    assert token_batches([10, 10], 4, 10, 3, 100) == [range(0, 1), range(1, 2)]  # 3 rows a prompt: 2 x 3 x 20 > 100
    assert token_batches([], 4, 10, 1, 100) == []


def test_a_prompt_of_100k_tokens_is_skipped_not_run() -> None:
    tokenizer = sample_tokenizer()
    model = build_tiny_model(TINY, tokenizer, seed=3)
    limit = position_limit(model)
    assert limit == TINY.max_position_embeddings
    huge = messages(None, "for (int i = 0; i < n; i++) a[i] = b[i] + c[i]; " * 6000)
    assert prompt_lengths(tokenizer, [huge])[0] > 100_000
    items = [Item("short-1", messages(None, "Does this loop race?")), Item("huge", huge),
             Item("short-2", messages(None, "Hi"))]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert too_long(model, tokenizer, [i.prompt for i in items], 8) == [1]
    notes: dict[str, str] = {}
    kept = fitting_records(model, tokenizer, items, 8, notes)
    assert [i.id for i in kept] == ["short-1", "short-2"]
    assert notes["too_long"].startswith(f"1 of 3 items skipped: prompt + 8 new tokens exceed the model's {limit}")
    assert "(huge)" in notes["too_long"]
    with pytest.raises(DataError, match=r"1 of 3 prompts do not fit the model's \d+ positions"):
        generate(model, tokenizer, [i.prompt for i in items], temperature=0.0, max_new_tokens=8)
    answers = generate(model, tokenizer, [i.prompt for i in kept], temperature=0.0, max_new_tokens=8)
    assert len(answers) == 2
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 1024, f"peak memory grew by {grown_mib:.0f} MiB for a prompt that is never run"
    assert fitting_records(model, tokenizer, kept, 8, notes := {}) == kept and notes == {}


def test_rl_prompt_sets_drop_prompts_that_leave_no_room_to_answer(caplog: pytest.LogCaptureFixture) -> None:
    tokenizer = sample_tokenizer()
    model = build_tiny_model(TINY, tokenizer, seed=3)
    limit = position_limit(model)
    assert limit is not None
    short, huge = messages(None, "Does this loop race?"), messages(None, "a[i] = a[i + 1]; " * 3000)
    rows = Dataset.from_list([{"prompt": short, "problem_id": "p1"}, {"prompt": huge, "problem_id": "p2"},
                              {"prompt": short, "problem_id": "p3"}])
    with caplog.at_level("WARNING"):
        kept = fitting_prompt_rows(rows, model, tokenizer, 64, "rl_test")
    assert kept["problem_id"] == ["p1", "p3"]
    assert f"rl_test: 1 of 3 prompts skipped: prompt + 64 new tokens exceed the model's {limit} positions" in \
        caplog.text
    assert fitting_prompt_rows(rows.select([0, 2]), model, tokenizer, 64, "rl_test")["problem_id"] == ["p1", "p3"]
    with pytest.raises(DataError, match=r"rl_test: none of the 1 prompts leaves room for max_completion_length=64"):
        fitting_prompt_rows(rows.select([1]), model, tokenizer, 64, "rl_test")


def test_the_position_rule_needs_only_the_saved_config(tmp_path: Path) -> None:
    tokenizer = sample_tokenizer()
    model = build_tiny_model(TINY, tokenizer, seed=3)
    model.save_pretrained(str(tmp_path / "m"))
    tokenizer.save_pretrained(str(tmp_path / "m"))
    (tmp_path / "m" / "model.safetensors").unlink()  # no weights: the config and the tokenizer are enough
    config, saved_tokenizer = load_saved_config(tmp_path / "m")
    assert position_limit(config) == position_limit(model) == TINY.max_position_embeddings
    items = [Item("short", messages(None, "Hi")), Item("huge", messages(None, "x = y + z; " * 5000))]
    notes: dict[str, str] = {}
    assert [i.id for i in fitting_records(config, saved_tokenizer, items, 8, notes)] == ["short"]
    assert "(huge)" in notes["too_long"]
    with pytest.raises(ConfigError, match="holds no saved model"):
        load_saved_config(tmp_path / "missing")


def test_a_given_opening_opens_every_answer_and_counts_within_the_new_tokens() -> None:
    import torch

    from hpcrl_core.data.dgemm.corpus import CODE_FENCE
    from hpcrl_core.evaluation.generate import render_prompts

    tokenizer = sample_tokenizer()
    model = build_tiny_model(TINY, tokenizer, seed=3)
    prompt = messages(None, "Write a C99 function dgemm")
    text = render_prompts(tokenizer, [prompt])[0]
    fence = tokenizer(CODE_FENCE, add_special_tokens=False)["input_ids"]
    # RL appends the fence's own ids to the prompt's: the same ids the text gives, which evaluation tokenizes
    ids = tokenizer(text + CODE_FENCE, add_special_tokens=False)["input_ids"]
    assert ids == tokenizer(text, add_special_tokens=False)["input_ids"] + fence
    answers = generate(model, tokenizer, [prompt], temperature=0.0, max_new_tokens=9, opening=CODE_FENCE)
    # greedy: the answer is the fence, then the continuation of prompt + fence in 9 - len(fence) new tokens
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=False,
                             max_new_tokens=9 - len(fence), pad_token_id=tokenizer.eos_token_id)
    rest = out[0, len(ids):].tolist()
    stops = [t for t in (tokenizer.eos_token_id,) if t is not None]
    rest = rest[:next((i for i, t in enumerate(rest) if t in stops), len(rest))]
    assert answers == [[CODE_FENCE + tokenizer.decode(rest, skip_special_tokens=True)]]
    with pytest.raises(ValueError, match=f"leaves none of max_new_tokens={len(fence)}"):
        generate(model, tokenizer, [prompt], temperature=0.0, max_new_tokens=len(fence), opening=CODE_FENCE)
