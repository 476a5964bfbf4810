"""Provenance of a model: git commit, content hashes of data and model folder, the folder's kind.

Run: pytest tests/test_provenance.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcrl_core import provenance
from hpcrl_core.errors import ConfigError, DataError


def _model(folder: Path, lora: bool = False) -> Path:
    folder.mkdir(parents=True)
    (folder / ("adapter_config.json" if lora else "config.json")).write_text('{"model_type": "qwen2"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    return folder


def test_data_hash_covers_the_dgemm_jsonl_files_only(tmp_path: Path) -> None:
    (tmp_path / "dgemm").mkdir()
    (tmp_path / "dgemm" / "train.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "dgemm" / "eval.jsonl").write_text('{"b": 2}\n')
    first = provenance.data_hash(tmp_path)
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    (tmp_path / "dgemm" / "card.md").write_text("not data")
    assert provenance.data_hash(tmp_path) == first
    (tmp_path / "dgemm" / "eval.jsonl").write_text('{"b": 3}\n')
    assert provenance.data_hash(tmp_path) != first
    with pytest.raises(DataError, match="no dgemm/\\*.jsonl under"):
        provenance.data_hash(tmp_path / "elsewhere")


def test_model_hash_changes_with_the_weights_only(tmp_path: Path) -> None:
    a, b = _model(tmp_path / "a"), _model(tmp_path / "b")
    assert provenance.model_hash(a) == provenance.model_hash(b)  # same files, another folder
    (b / "model.safetensors").write_bytes(b"\1" * 64)
    assert provenance.model_hash(a) != provenance.model_hash(b)


def test_check_model_dir_tells_models_from_adapters_and_rejects_other_folders(tmp_path: Path) -> None:
    assert provenance.check_model_dir(_model(tmp_path / "full")) == "hf_model"
    assert provenance.check_model_dir(_model(tmp_path / "lora", lora=True)) == "lora_adapter"
    with pytest.raises(ConfigError, match="does not exist"):
        provenance.check_model_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no config.json"):
        provenance.check_model_dir(tmp_path / "empty")


def test_model_tags_check_the_model_before_the_data(tmp_path: Path) -> None:
    model = _model(tmp_path / "m")
    with pytest.raises(ConfigError, match="missing does not exist"):
        provenance.model_tags(tmp_path / "missing", tmp_path / "no-data")
    with pytest.raises(DataError, match="no dgemm"):
        provenance.model_tags(model, tmp_path / "no-data")
    (tmp_path / "data" / "dgemm").mkdir(parents=True)
    (tmp_path / "data" / "dgemm" / "train.jsonl").write_text("{}\n")
    tags = provenance.model_tags(model, tmp_path / "data")
    assert tags == {"git_commit": provenance.git_commit(), "data_hash": provenance.data_hash(tmp_path / "data"),
                    "model_kind": "hf_model", "model_hash": provenance.model_hash(model)}


def test_git_commit_is_unknown_outside_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert provenance.git_commit(tmp_path) == "unknown"


def test_data_hash_over_several_globs_is_their_union(tmp_path: Path) -> None:
    for family, text in (("race_c", "r"), ("plp", "p"), ("dgemm", "d")):
        (tmp_path / family).mkdir()
        (tmp_path / family / "train.jsonl").write_text(f'{{"{text}": 1}}\n')
    tasks = ("race_c/*.jsonl", "plp/*.jsonl")
    first = provenance.data_hash(tmp_path, tasks)
    (tmp_path / "dgemm" / "train.jsonl").write_text('{"d": 2}\n')  # not in the globs
    assert provenance.data_hash(tmp_path, tasks) == first
    (tmp_path / "plp" / "train.jsonl").write_text('{"p": 2}\n')
    assert provenance.data_hash(tmp_path, tasks) != first
    assert provenance.data_hash(tmp_path, ("race_c/*.jsonl", "race_c/*.jsonl")) == provenance.data_hash(
        tmp_path, "race_c/*.jsonl")
    with pytest.raises(DataError, match=r"no mlperf/\*.jsonl or plp/\*.jsonl under"):
        provenance.data_hash(tmp_path / "elsewhere", ("mlperf/*.jsonl", "plp/*.jsonl"))
