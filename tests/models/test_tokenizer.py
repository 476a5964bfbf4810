"""Tests of the tokenizer: training, exact round trips, ChatML rendering, the prompt-prefix property TRL's
completion-only loss relies on, save/load, and training texts from data/.

Run: pytest tests/models/test_tokenizer.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trl.chat_template_utils import has_generation_markers, is_chat_template_stop_token_trained

from hpcrl_core.data.schema import Record, write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.tokenizer import (
    IM_END,
    IM_START,
    PAD,
    SPECIAL_TOKENS,
    load_tokenizer,
    make_pre_tokenizer,
    save_tokenizer,
    texts_from_data,
    tokens_per_text,
    train_tokenizer,
)
from tests.models import AWKWARD, dgemm_records, qa_records, sample_texts, sample_tokenizer


def test_trained_tokenizer_has_the_vocabulary_and_special_tokens() -> None:
    tok = sample_tokenizer()
    assert len(tok) == 800
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert tok.eos_token == IM_END and tok.pad_token == PAD and tok.bos_token is None
    # Special tokens are atomic: never split into their characters.
    assert tok(f"{IM_START}user\nhi{IM_END}", add_special_tokens=False)["input_ids"][0] == 1


@pytest.mark.parametrize("text", [*AWKWARD, "never seen: Ω≈ç√ \t\t}}}\n", dgemm_records()[0].response])
def test_decode_of_encode_is_the_identity(text: str) -> None:
    tok = sample_tokenizer()
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_chat_template_renders_chatml_and_the_generation_prompt() -> None:
    tok = sample_tokenizer()
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    full = tok.apply_chat_template([*msgs, {"role": "assistant", "content": "4"}], tokenize=False)
    assert full == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
                    "<|im_start|>assistant\n4<|im_end|>\n")
    prompt = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=False).endswith("<|im_end|>\n")


@pytest.mark.parametrize("record", [*dgemm_records()[:6], *qa_records()[:6]], ids=lambda r: r.id)
def test_tokenized_prompt_is_an_exact_prefix_of_prompt_plus_completion(record: Record) -> None:
    # TRL's SFTTrainer masks the loss of the first len(prompt) tokens; a mismatch would cut the prompt short.
    tok = sample_tokenizer()
    prompt = tok.apply_chat_template(record.prompt, add_generation_prompt=True, return_dict=True)["input_ids"]
    full = tok.apply_chat_template(record.prompt + record.completion, return_dict=True)["input_ids"]
    assert full[: len(prompt)] == prompt
    assert tok.decode(full[len(prompt):]) == record.response + "<|im_end|>\n"


def test_assistant_mask_covers_the_answer_and_its_stop_token() -> None:
    tok = sample_tokenizer()
    assert has_generation_markers(tok.chat_template) and is_chat_template_stop_token_trained(tok)
    record = qa_records()[0]
    out = tok.apply_chat_template(record.prompt + record.completion, return_dict=True,
                                  return_assistant_tokens_mask=True)
    masked = [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    assert tok.decode(masked) == record.response + IM_END


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    tok = sample_tokenizer()
    save_tokenizer(tok, tmp_path / "tok")
    back = load_tokenizer(tmp_path / "tok")
    record = dgemm_records()[1]
    msgs = record.prompt + record.completion
    assert back.apply_chat_template(msgs, return_dict=True)["input_ids"] == \
        tok.apply_chat_template(msgs, return_dict=True)["input_ids"]
    assert (back.eos_token, back.pad_token, len(back)) == (IM_END, PAD, len(tok))
    assert back.decode(back(AWKWARD[2])["input_ids"]) == AWKWARD[2]


def test_tokenizer_saved_next_to_a_model_loads_as_saved(tmp_path: Path) -> None:
    """A checkpoint folder holds the model's config.json (model_type qwen2) next to the tokenizer; loading must not
    switch to Qwen2's own tokenizer class, whose pre-tokenizer splits text differently from the trained one."""
    from hpcrl_core.models.saved import load_saved_policy
    from hpcrl_core.models.tiny import build_tiny_model
    from tests.models import TINY

    tok = sample_tokenizer()
    folder = tmp_path / "final"
    build_tiny_model(TINY, tok, seed=1).save_pretrained(str(folder))
    save_tokenizer(tok, folder)
    _, back = load_saved_policy(folder)
    for text in (dgemm_records()[0].response, *AWKWARD):
        assert back(text)["input_ids"] == tok(text)["input_ids"]
    assert load_tokenizer(folder)("    for (int i = 0; i < n; i++)\n")["input_ids"] == \
        tok("    for (int i = 0; i < n; i++)\n")["input_ids"]


def test_load_of_a_missing_tokenizer_names_the_path_and_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.tokenizer\.path.*nowhere"):
        load_tokenizer(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"model\.tokenizer\.path.*empty"):
        load_tokenizer(tmp_path / "empty")


def test_texts_from_data_yield_every_family_and_fail_without_data(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "dgemm" / "train.jsonl", dgemm_records()[:2])
    write_jsonl(tmp_path / "mlperf" / "train.jsonl", qa_records()[:3])
    write_jsonl(tmp_path / "mlperf" / "eval.jsonl", qa_records()[3:5])  # eval data must not leak into the tokenizer
    texts = list(texts_from_data(tmp_path))
    assert len(texts) == 2 * 2 + 3 * 3  # dgemm: user + assistant; mlperf: system + user + assistant
    assert f"assistant\n{dgemm_records()[0].response}" in texts
    assert not any(qa_records()[3].question in t for t in texts)
    with pytest.raises(DataError, match="prepare"):
        list(texts_from_data(tmp_path / "missing"))


def test_line_merging_pre_tokenizer_beats_plain_byte_level_bpe() -> None:
    # What the tokenizer is for: far fewer tokens per kernel than GPT-2-style BPE at the same vocabulary.
    # (On this small corpus at 3000: ~233 against ~767; plain BPE runs out of merges below 2000.)
    kernels = [r.response for r in dgemm_records()]
    lines = tokens_per_text(train_tokenizer(sample_texts(), 3000, 2), kernels)
    words = tokens_per_text(train_tokenizer(sample_texts(), 3000, 2, pre_tokenizer="gpt2"), kernels)
    assert lines < 0.5 * words


def test_unknown_pre_tokenizer_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="lines"):
        make_pre_tokenizer("words")
