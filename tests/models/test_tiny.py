"""Tests of the tiny Qwen2 model: config from params and tokenizer, seeded init, forward shapes, generation.

Run: pytest tests/models/test_tiny.py
"""

from __future__ import annotations

import pytest
import torch

from hpcrl_core.config import TinyModelParams, parse_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.tiny import build_tiny_model, count_parameters
from tests.models import TINY, qa_records, sample_tokenizer


def test_model_matches_params_and_tokenizer() -> None:
    tok = sample_tokenizer()
    model = build_tiny_model(TINY, tok)
    c = model.config
    assert (c.vocab_size, c.hidden_size, c.num_hidden_layers) == (len(tok), 32, 2)
    assert (c.num_attention_heads, c.num_key_value_heads, c.intermediate_size) == (4, 2, 64)
    assert c.eos_token_id == tok.eos_token_id and c.pad_token_id == tok.pad_token_id
    assert model.generation_config.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
    assert model.lm_head.weight is model.model.embed_tokens.weight  # tied embeddings
    untied = build_tiny_model(TINY.model_copy(update={"tie_word_embeddings": False}), tok)
    assert count_parameters(untied) == count_parameters(model) + len(tok) * 32


def test_init_is_seeded_and_leaves_the_global_rng_alone() -> None:
    tok = sample_tokenizer()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a = build_tiny_model(TINY, tok, seed=1)
    assert torch.equal(torch.rand(3), expected)
    b = build_tiny_model(TINY, tok, seed=1)
    c = build_tiny_model(TINY, tok, seed=2)
    wa, wb, wc = (m.model.layers[0].self_attn.q_proj.weight for m in (a, b, c))
    assert torch.equal(wa, wb) and not torch.equal(wa, wc)


def test_forward_shapes_and_loss() -> None:
    tok = sample_tokenizer()
    model = build_tiny_model(TINY, tok)
    batch = tok(["int i;\n", "for (;;) {}\n\tx++;\n"], padding=True, return_tensors="pt")
    out = model(**batch, labels=batch["input_ids"])
    assert out.logits.shape == (2, batch["input_ids"].shape[1], len(tok))
    assert out.loss is not None and torch.isfinite(out.loss)


def test_generates_a_few_tokens_after_the_chat_prompt() -> None:
    tok = sample_tokenizer()
    model = build_tiny_model(TINY, tok).eval()
    prompt = tok.apply_chat_template(qa_records()[0].prompt, add_generation_prompt=True, return_dict=True,
                                     return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**prompt, max_new_tokens=6, do_sample=False)
    n = prompt["input_ids"].shape[1]
    assert torch.equal(out[0, :n], prompt["input_ids"][0])
    assert 1 <= out.shape[1] - n <= 6
    assert isinstance(tok.decode(out[0, n:]), str)


@pytest.mark.parametrize(("tiny", "needle"), [
    ({"hidden_size": 96, "num_heads": 5}, "divisible by num_heads"),
    ({"hidden_size": 96, "num_heads": 4, "num_kv_heads": 3}, "divisible by num_kv_heads"),
    ({"hidden_size": 36, "num_heads": 4}, "must be even"),
])
def test_inconsistent_sizes_are_config_errors(tiny: dict[str, int], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_params({"model": {"tiny": tiny}})


def test_defaults_are_the_measured_small_policy() -> None:
    p = TinyModelParams()
    assert (p.hidden_size, p.num_layers, p.num_heads, p.intermediate_size, p.tie_word_embeddings) == \
        (256, 2, 4, 768, True)
