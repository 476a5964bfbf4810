"""Tests of ``load_policy`` with the tiny source and of the ``model`` params section: bad configurations fail with
clear errors before any training could start.

Run: pytest tests/models/test_build.py
"""

from __future__ import annotations

from pathlib import Path

import pytest
from peft import PeftModel

from hpcrl_core.config import ModelParams, load_params, parse_params
from hpcrl_core.data.schema import write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.build import load_policy
from hpcrl_core.models.tokenizer import load_tokenizer, save_tokenizer
from tests.models import TINY, dgemm_records, qa_records, sample_tokenizer

ROOT = Path(__file__).resolve().parents[2]


def _model_params(**section: object) -> ModelParams:
    return parse_params({"model": {"tiny": TINY.model_dump(), **section}}).model


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    write_jsonl(root / "dgemm" / "train.jsonl", dgemm_records())
    write_jsonl(root / "mlperf" / "train.jsonl", qa_records())
    return root


def test_tiny_policy_trains_its_tokenizer_on_data_and_saves_it(data_dir: Path, tmp_path: Path) -> None:
    mp = _model_params(tokenizer={"vocab_size": 700})
    model, tok = load_policy(mp, data_dir, tokenizer_dir=tmp_path / "tok")
    assert len(tok) == 700 and model.config.vocab_size == 700 and model.config.hidden_size == 32
    saved = load_tokenizer(tmp_path / "tok")
    text = dgemm_records()[0].response
    assert saved(text)["input_ids"] == tok(text)["input_ids"]


def test_tiny_policy_uses_a_saved_tokenizer(tmp_path: Path) -> None:
    save_tokenizer(sample_tokenizer(), tmp_path / "tok")
    model, tok = load_policy(_model_params(tokenizer={"path": str(tmp_path / "tok")}), tmp_path / "no-data")
    assert len(tok) == len(sample_tokenizer()) == model.config.vocab_size


def test_tiny_policy_with_lora(tmp_path: Path) -> None:
    save_tokenizer(sample_tokenizer(), tmp_path / "tok")
    mp = _model_params(tokenizer={"path": str(tmp_path / "tok")}, lora={"enabled": True, "target_modules": ["o_proj"]})
    model, _ = load_policy(mp, tmp_path)
    assert isinstance(model, PeftModel)


def test_missing_tokenizer_path_names_path_and_key(tmp_path: Path) -> None:
    mp = _model_params(tokenizer={"path": str(tmp_path / "gone")})
    with pytest.raises(ConfigError, match=r"model\.tokenizer\.path: .*gone does not exist"):
        load_policy(mp, tmp_path)


def test_no_data_to_train_a_tokenizer_on(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="dvc repro prepare"):
        load_policy(_model_params(), tmp_path / "data")


@pytest.mark.parametrize(("section", "needle"), [
    ({"sizes": 3}, r"model\.sizes: unknown key .*allowed keys here: hf, lora, source, tiny, tokenizer"),
    ({"tiny": {"hidden": 64}}, r"model\.tiny\.hidden: unknown key .*hidden_size"),
    ({"source": "hub"}, r"model\.source: received 'hub'.*'tiny' or 'hf'"),
    ({"hf": {"dtype": "fp8"}}, r"model\.hf\.dtype: received 'fp8'"),
    ({"lora": {"target_modules": ["q_proj", "q_proj"]}}, "distinct"),
    ({"tokenizer": {"vocab_size": 100}}, r"model\.tokenizer\.vocab_size: received 100"),
])
def test_bad_model_sections_are_config_errors(section: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        parse_params({"model": section})


def test_shipped_params_hold_the_default_model_section() -> None:
    assert load_params(ROOT / "params.yaml").model == ModelParams()
