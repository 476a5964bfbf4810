"""Tests of ``model.source: hf``: a local checkpoint the test saves itself loads back with its tokenizer, and every
problem with the folder is a ConfigError naming model.hf.path. No hub access.

Run: pytest tests/models/test_hf.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hpcrl_core.config import HFModelParams, parse_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.build import load_policy
from hpcrl_core.models.hf import load_hf_model
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.models.tokenizer import save_tokenizer
from tests.models import TINY, qa_records, sample_tokenizer


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ckpt")
    build_tiny_model(TINY, sample_tokenizer(), seed=7).save_pretrained(str(folder))
    save_tokenizer(sample_tokenizer(), folder)
    return folder


def test_loads_the_saved_model_and_tokenizer(checkpoint: Path) -> None:
    model, tok = load_hf_model(HFModelParams(path=str(checkpoint)))
    original = build_tiny_model(TINY, sample_tokenizer(), seed=7).eval()
    ids = tok.apply_chat_template(qa_records()[0].prompt, add_generation_prompt=True, return_dict=True,
                                  return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model.eval()(ids).logits, original(ids).logits, atol=1e-5)
    assert tok.eos_token == "<|im_end|>" and tok.chat_template == sample_tokenizer().chat_template


def test_our_own_checkpoint_tokenizes_as_in_training(checkpoint: Path) -> None:
    # config.json says qwen2, so AutoTokenizer would pick Qwen2Tokenizer and rebuild the pre-tokenizer with its own
    # regex: every line would split into other tokens than the model was trained on (checkpoints/sft/final as
    # model.hf.path for further training).
    _, tok = load_hf_model(HFModelParams(path=str(checkpoint)))
    text = "#include <stdlib.h>\nvoid dgemm(int n, const double *A, const double *B, double *C)\n{\n"
    assert tok(text)["input_ids"] == sample_tokenizer()(text)["input_ids"]


def test_dtype_is_applied(checkpoint: Path) -> None:
    model, _ = load_hf_model(HFModelParams(path=str(checkpoint), dtype="bfloat16"))
    assert next(model.parameters()).dtype == torch.bfloat16


def test_load_policy_with_source_hf(checkpoint: Path, tmp_path: Path) -> None:
    mp = parse_params({"model": {"source": "hf", "hf": {"path": str(checkpoint)}}}).model
    model, tok = load_policy(mp, data_dir=tmp_path / "no-data-needed")
    assert model.config.vocab_size == len(tok) and model.generation_config.pad_token_id == tok.pad_token_id


def test_source_hf_without_a_path_is_rejected_by_the_schema() -> None:
    with pytest.raises(ConfigError, match=r"model\.hf\.path"):
        parse_params({"model": {"source": "hf"}})


def test_missing_folder_names_the_key_and_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.hf\.path.*does not exist"):
        load_hf_model(HFModelParams(path=str(tmp_path / "qwen")))


def test_folder_without_config_json(checkpoint: Path, tmp_path: Path) -> None:
    (tmp_path / "tokenizer_only").mkdir()
    save_tokenizer(sample_tokenizer(), tmp_path / "tokenizer_only")
    with pytest.raises(ConfigError, match=r"tokenizer_only has no config\.json"):
        load_hf_model(HFModelParams(path=str(tmp_path / "tokenizer_only")))


def test_folder_without_weights(checkpoint: Path, tmp_path: Path) -> None:
    folder = tmp_path / "no_weights"
    folder.mkdir()
    for f in checkpoint.iterdir():
        if not f.name.endswith(".safetensors"):
            (folder / f.name).write_bytes(f.read_bytes())
    with pytest.raises(ConfigError, match=r"model\.hf\.path: cannot load"):
        load_hf_model(HFModelParams(path=str(folder)))


def test_tokenizer_without_chat_template_fails_before_training(checkpoint: Path, tmp_path: Path) -> None:
    folder = tmp_path / "base"
    model, tok = load_hf_model(HFModelParams(path=str(checkpoint)))
    tok.chat_template = None
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    mp = parse_params({"model": {"source": "hf", "hf": {"path": str(folder)}}}).model
    with pytest.raises(ConfigError, match="no chat template"):
        load_policy(mp, data_dir=tmp_path)
