"""Tests of LoRA via peft: adapters on q_proj/v_proj of a saved local checkpoint, only they train, and bad target
modules are ConfigErrors that list the model's linear modules.

Run: pytest tests/models/test_lora.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hpcrl_core.config import LoraParams, parse_params
from hpcrl_core.errors import ConfigError
from hpcrl_core.models.build import load_policy
from hpcrl_core.models.lora import apply_lora, linear_module_names
from hpcrl_core.models.tiny import build_tiny_model, count_parameters
from hpcrl_core.models.tokenizer import save_tokenizer
from tests.models import TINY, sample_tokenizer

QWEN2_LINEAR = ["down_proj", "gate_proj", "k_proj", "lm_head", "o_proj", "q_proj", "up_proj", "v_proj"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ckpt")
    build_tiny_model(TINY, sample_tokenizer(), seed=3).save_pretrained(str(folder))
    save_tokenizer(sample_tokenizer(), folder)
    return folder


def test_lora_on_a_local_checkpoint_trains_only_the_adapters(checkpoint: Path, tmp_path: Path) -> None:
    lora = {"enabled": True, "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}
    mp = parse_params({"model": {"source": "hf", "hf": {"path": str(checkpoint)}, "lora": lora}}).model
    model, tok = load_policy(mp, data_dir=tmp_path)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n in trainable} == {"q_proj", "v_proj"}
    # 2 layers x (q: 32->32, v: 32->16 with 2 kv heads) x (A + B), r = 4
    assert count_parameters(model, trainable_only=True) == 2 * (4 * (32 + 32) + 4 * (32 + 16))
    ids = tok("int i;\n", return_tensors="pt")["input_ids"]
    model.eval()
    with torch.no_grad(), model.disable_adapter():
        base = model(ids).logits
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, base)  # lora_B starts at zero: the wrapped model is unchanged


def test_linear_module_names_of_qwen2() -> None:
    assert linear_module_names(build_tiny_model(TINY, sample_tokenizer())) == QWEN2_LINEAR


def test_unknown_target_module_lists_the_models_linear_modules() -> None:
    model = build_tiny_model(TINY, sample_tokenizer())
    with pytest.raises(ConfigError) as err:
        apply_lora(model, LoraParams(enabled=True, target_modules=("q_proj", "c_attn")))
    msg = str(err.value)
    assert "model.lora.target_modules" in msg and "'c_attn'" in msg and "gate_proj" in msg


def test_lora_on_tiny_without_target_modules_is_rejected_by_the_schema() -> None:
    with pytest.raises(ConfigError) as err:
        parse_params({"model": {"lora": {"enabled": True}}})
    msg = str(err.value)
    assert "model.lora.target_modules" in msg and "q_proj" in msg and "down_proj" in msg


def test_empty_target_modules_use_peft_defaults_for_hf(checkpoint: Path, tmp_path: Path) -> None:
    mp = parse_params({"model": {"source": "hf", "hf": {"path": str(checkpoint)}, "lora": {"enabled": True}}}).model
    model, _ = load_policy(mp, data_dir=tmp_path)
    assert {n.split(".lora_")[0].rsplit(".", 1)[-1] for n, p in model.named_parameters() if p.requires_grad} == \
        {"q_proj", "v_proj"}


def test_a_model_with_adapters_cannot_get_more() -> None:
    once = apply_lora(build_tiny_model(TINY, sample_tokenizer()), LoraParams(enabled=True, target_modules=("q_proj",)))
    with pytest.raises(ConfigError, match="already carries adapters"):
        apply_lora(once, LoraParams(enabled=True, target_modules=("q_proj",)))  # type: ignore[arg-type]
