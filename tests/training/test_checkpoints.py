"""Tests of checkpoint staleness and completeness, and of the saved policy folder. Run:
pytest tests/training/test_checkpoints.py"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from transformers import AutoModelForCausalLM, AutoTokenizer

from hpcrl_core.models.saved import load_saved_policy
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.training.checkpoints import (
    STOCK_TOKENIZER_DIR,
    inputs_fingerprint,
    last_checkpoint,
    reset_if_stale,
    save_policy,
)
from tests.models import TINY, qa_records, sample_tokenizer


def test_fingerprint_follows_bytes_and_settings(tmp_path: Path) -> None:
    f = tmp_path / "train.jsonl"
    f.write_text("a\n")
    base = inputs_fingerprint([f], {"lr": 1e-3})
    assert inputs_fingerprint([f], {"lr": 1e-3}) == base
    assert inputs_fingerprint([f], {"lr": 2e-3}) != base
    f.write_text("b\n")
    assert inputs_fingerprint([f], {"lr": 1e-3}) != base


def test_reset_only_when_stale(tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    assert reset_if_stale(out, "one") is False  # empty: nothing to clear
    (out / "checkpoint-2").mkdir()
    assert reset_if_stale(out, "one") is False and (out / "checkpoint-2").exists()  # same inputs: keep
    assert reset_if_stale(out, "two") is True and not (out / "checkpoint-2").exists()  # other inputs: clear
    unmarked = tmp_path / "old"
    (unmarked / "checkpoint-9").mkdir(parents=True)
    assert reset_if_stale(unmarked, "x") is True  # checkpoints of unknown origin are not resumed


def _checkpoint(out: Path, step: int, state: str | None) -> Path:
    folder = out / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    if state is not None:
        (folder / "trainer_state.json").write_text(state)
    return folder


def test_last_checkpoint_is_the_newest_complete_one_by_step_number(tmp_path: Path) -> None:
    assert last_checkpoint(tmp_path / "missing") is None
    assert last_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 9, json.dumps({"global_step": 9}))
    _checkpoint(tmp_path, 10, json.dumps({"global_step": 10}))  # 10 > 9 by number, though "10" < "9" as text
    (tmp_path / "checkpoint-final-notes").mkdir()
    assert last_checkpoint(tmp_path) == tmp_path / "checkpoint-10"


def test_half_written_checkpoints_are_skipped_and_deleted(tmp_path: Path) -> None:
    good = _checkpoint(tmp_path, 20, json.dumps({"global_step": 20}))
    no_state = _checkpoint(tmp_path, 30, None)  # killed before the state file
    torn = _checkpoint(tmp_path, 40, '{"global_step": 4')  # killed while writing it
    assert last_checkpoint(tmp_path) == good
    assert good.exists() and not no_state.exists() and not torn.exists()
    only_bad = tmp_path / "other"
    _checkpoint(only_bad, 5, None)
    assert last_checkpoint(only_bad) is None and not any(only_bad.iterdir())


def test_a_saved_policy_loads_with_stock_transformers_as_it_was_trained(tmp_path: Path) -> None:
    # What a user does with a registered model: AutoTokenizer + AutoModelForCausalLM, no hpcrl code.
    tok = sample_tokenizer()
    model = build_tiny_model(TINY, tok, seed=3)
    trainer = SimpleNamespace(processing_class=tok, save_model=lambda path: model.save_pretrained(path))
    save_policy(trainer, tmp_path / "final")
    record = qa_records()[0]
    text = tok.apply_chat_template(record.prompt + record.completion, tokenize=False)
    trained = tok(text)["input_ids"]
    stock = AutoTokenizer.from_pretrained(str(tmp_path / "final" / STOCK_TOKENIZER_DIR), local_files_only=True)
    assert stock(text)["input_ids"] == trained
    assert stock.chat_template == tok.chat_template and stock.eos_token == tok.eos_token
    assert AutoModelForCausalLM.from_pretrained(str(tmp_path / "final")).config.vocab_size == len(stock)
    _, own = load_saved_policy(tmp_path / "final")  # hpcrl's own loader reads the folder itself right
    assert own(text)["input_ids"] == trained
