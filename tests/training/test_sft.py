"""SFT assembly: data loading, SFTConfig from params, checks before training, training, resume from a checkpoint.

Everything is tiny (hidden 32, 2 layers, vocabulary 512) and runs on CPU, offline, in well under a minute.

Run: ``.venv/bin/python -m pytest tests/training/test_sft.py -q``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from trl import SFTConfig

from hpcrl_core.config import Params, parse_params
from hpcrl_core.data.schema import FAMILIES, Record, assistant, messages, write_jsonl
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.training.checkpoints import last_checkpoint
from hpcrl_core.training.sft import UniformTokenSFTTrainer, build_sft_trainer, run_sft
from hpcrl_core.training.sft_data import (
    load_sft_datasets,
    longest_record_tokens,
    mean_completion_tokens,
    record_tokens,
)

ANSWERS = {
    "dgemm": "```c\nfor (int i = 0; i < n; i++)\n  for (int k = 0; k < n; k++)\n"
             "    C[i*n+j] += A[i*n+k] * B[k*n+j];\n```",
    "race_c": "yes: the loop writes a[i+1] while another iteration reads a[i].",
    "race_fortran": "no: each iteration writes only its own element of a.",
    "mlperf": "The closed division fixes the model and the quality target.",
    "plp": "OpenMP schedule(static) splits the iterations into equal chunks ahead of time.",
}


def _records(family: str, count: int) -> list[Record]:
    return [Record(family=family, prompt=messages("You are an HPC expert.", f"Question {i} about {family}?"),
                   completion=assistant(f"{ANSWERS[family]} ({i})"), answer="") for i in range(count)]


def make_data(root: Path, per_family: int = 4) -> Path:
    """data/<family>/{train,eval}.jsonl for every family, plus a DGEMM problems file (empty completions)."""
    for family in FAMILIES:
        write_jsonl(root / family / "train.jsonl", _records(family, per_family))
        write_jsonl(root / family / "eval.jsonl", _records(family, 1))
    problem = Record(family="dgemm", prompt=messages(None, "Write a DGEMM kernel."), completion=[], answer="")
    write_jsonl(root / "dgemm" / "problems_train.jsonl", [problem])
    return root


def make_params(**sft: Any) -> Params:
    defaults: dict[str, Any] = {"max_steps": 4, "per_device_train_batch_size": 4, "per_device_eval_batch_size": 8,
                                "max_length": 256, "eval_steps": 1000, "save_steps": 1000, "logging_steps": 1,
                                "warmup_ratio": 0.0, "seed": 7}
    return parse_params({
        "model": {"tiny": {"hidden_size": 32, "num_layers": 2, "num_heads": 4, "num_kv_heads": 2,
                           # 2048: the DGEMM prompts take ~860 tokens of this small vocabulary, and generation
                           # refuses a prompt that does not fit the positions with its new tokens
                           "intermediate_size": 64, "max_position_embeddings": 2048},
                  "tokenizer": {"vocab_size": 512, "min_frequency": 2}},
        "sft": {**defaults, **sft},
    })


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return make_data(tmp_path / "data")


def test_datasets_hold_prompt_completion_only_and_skip_empty(tmp_path: Path) -> None:
    root = make_data(tmp_path / "data")
    empty = Record(family="plp", prompt=messages(None, "Nothing to imitate"), completion=[], answer="")
    write_jsonl(root / "plp" / "train.jsonl", [*_records("plp", 4), empty])
    train, evaluation = load_sft_datasets(root, ("plp", "mlperf"), seed=0)
    assert train.column_names == ["prompt", "completion"] and evaluation.column_names == ["prompt", "completion"]
    assert len(train) == 8 and len(evaluation) == 2  # the empty completion is gone
    all_train, _ = load_sft_datasets(root, FAMILIES, seed=0)
    assert len(all_train) == 4 * len(FAMILIES)  # problems_train.jsonl is never read


def test_repeats_show_a_familys_train_records_more_often_and_eval_once(tmp_path: Path) -> None:
    root = make_data(tmp_path / "data")
    train, evaluation = load_sft_datasets(root, ("plp", "mlperf"), seed=0, repeats={"plp": 3})
    assert len(train) == 3 * 4 + 4 and len(evaluation) == 2
    prompts = [json.dumps(row["prompt"]) for row in train]
    assert max(prompts.count(p) for p in prompts) == 3  # each plp record three times, each mlperf record once
    with pytest.raises(ConfigError, match="repeats must map families"):
        parse_params({"sft": {"families": ["plp"], "repeats": {"mlperf": 2}}})


def test_missing_data_file_is_a_data_error_naming_it(data_dir: Path) -> None:
    (data_dir / "race_fortran" / "eval.jsonl").unlink()
    with pytest.raises(DataError, match=r"race_fortran/eval\.jsonl.*dvc repro prepare"):
        load_sft_datasets(data_dir, FAMILIES)


def test_longest_record_matches_what_trl_tokenizes(data_dir: Path, tmp_path: Path) -> None:
    trainer = build_sft_trainer(make_params(), data_dir, tmp_path / "out", report_to=[])
    args = trainer.args
    assert isinstance(args, SFTConfig) and args.use_cpu and not args.bf16 and args.completion_only_loss
    assert (tmp_path / "out" / "tokenizer" / "tokenizer_config.json").is_file()
    train, _ = load_sft_datasets(data_dir, FAMILIES, seed=7)
    longest = longest_record_tokens(train, trainer.processing_class)  # type: ignore[arg-type]
    assert longest == max(len(row["input_ids"]) for row in trainer.train_dataset)  # type: ignore[union-attr]


def test_records_longer_than_max_length_are_skipped_with_a_count(data_dir: Path, tmp_path: Path) -> None:
    train, evaluation = load_sft_datasets(data_dir, FAMILIES, seed=7)
    tokenizer = build_sft_trainer(make_params(), data_dir, tmp_path / "probe", report_to=[]).processing_class
    lengths = sorted(record_tokens(r["prompt"], r["completion"], tokenizer) for r in train)  # type: ignore[arg-type]
    cut = lengths[len(lengths) // 2]  # about half the train records are longer
    notes: dict[str, str] = {}
    trainer = build_sft_trainer(make_params(max_length=cut), data_dir, tmp_path / "out", report_to=[], notes=notes)
    kept = sum(n <= cut for n in lengths)
    assert len(trainer.train_dataset) == kept < len(train)  # type: ignore[arg-type]
    assert notes["train_too_long"] == (f"{len(train) - kept} of {len(train)} train records skipped: longer than "
                                       f"sft.max_length={cut} tokens (longest {lengths[-1]})")
    assert max(len(row["input_ids"]) for row in trainer.train_dataset) <= cut  # type: ignore[union-attr]
    assert "eval_too_long" in notes or all(
        record_tokens(r["prompt"], r["completion"], tokenizer) <= cut for r in evaluation)  # type: ignore[arg-type]


def test_max_length_below_every_record_fails_before_training(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sft\.max_length: received 16, but every train record is longer \(the "
                                          r"shortest is \d+ tokens\)"):
        run_sft(make_params(max_length=16), data_dir, tmp_path / "out", report_to=[])
    assert last_checkpoint(tmp_path / "out") is None


def test_trl_passthrough_is_checked_and_applied(data_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sft\.trl\.max_grad_nrom: not a field of SFTConfig.*max_grad_norm"):
        build_sft_trainer(make_params(trl={"max_grad_nrom": 0.5}), data_dir, tmp_path / "a", report_to=[])
    with pytest.raises(ConfigError, match=r"sft\.trl\.learning_rate: owned by the sft stage.*sft\.learning_rate"):
        build_sft_trainer(make_params(trl={"learning_rate": 1.0}), data_dir, tmp_path / "b", report_to=[])
    trainer = build_sft_trainer(make_params(trl={"max_grad_norm": 0.5}), data_dir, tmp_path / "c", report_to=[])
    assert trainer.args.max_grad_norm == 0.5


def test_loss_is_finite_and_falls(data_dir: Path, tmp_path: Path) -> None:
    params = make_params(max_steps=20, learning_rate=1e-2, lr_scheduler_type="constant")
    trainer = build_sft_trainer(params, data_dir, tmp_path / "out", report_to=[])
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert len(losses) == 20 and all(math.isfinite(x) for x in losses)
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < 0.5 * first, f"loss did not fall enough: {first:.3f} -> {last:.3f}"


def test_run_resumes_from_last_checkpoint(data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run_sft(make_params(max_steps=4, save_steps=2, eval_steps=2), data_dir, out, report_to=[])
    assert first["resumed_from"] is None and first["global_step"] == 4
    assert math.isfinite(first["train_loss"]) and math.isfinite(first["eval_loss"])
    assert (out / "final" / "config.json").is_file() and (out / "final" / "tokenizer_config.json").is_file()
    assert last_checkpoint(out) == out / "checkpoint-4"
    same = run_sft(make_params(max_steps=4, save_steps=2, eval_steps=2), data_dir, out, report_to=[])
    assert same["global_step"] == 4 and same["train_loss"] == pytest.approx(first["train_loss"])
    assert last_checkpoint(out) == out / "checkpoint-4"  # a finished run is not resumed: no step 5

    # Mark the saved state: only a run that loads checkpoint-4's trainer state carries the marker forward.
    state_path = out / "checkpoint-4" / "trainer_state.json"
    state = json.loads(state_path.read_text())
    state["log_history"].append({"step": 4, "marker": "first run"})
    state_path.write_text(json.dumps(state))

    second = run_sft(make_params(max_steps=6, save_steps=2, eval_steps=2), data_dir, out, report_to=[])
    assert second["resumed_from"] == str(out / "checkpoint-4") and second["global_step"] == 6
    history = json.loads((out / "checkpoint-6" / "trainer_state.json").read_text())["log_history"]
    assert {"step": 4, "marker": "first run"} in history
    loss_steps = [e["step"] for e in history if "loss" in e]
    assert loss_steps == [1, 2, 3, 4, 5, 6]  # steps 1-4 come from the first run, only 5 and 6 were trained again


def test_uniform_token_weighting_divides_the_summed_loss_by_a_constant(data_dir: Path, tmp_path: Path) -> None:
    batch_trainer = build_sft_trainer(make_params(), data_dir, tmp_path / "a", report_to=[])
    uniform = build_sft_trainer(make_params(token_weighting="uniform"), data_dir, tmp_path / "b", report_to=[])
    assert isinstance(uniform, UniformTokenSFTTrainer) and not isinstance(batch_trainer, UniformTokenSFTTrainer)
    train, _ = load_sft_datasets(data_dir, FAMILIES, seed=7)
    mean_tokens = mean_completion_tokens(train, uniform.processing_class)  # type: ignore[arg-type]
    labelled = [sum(x != -100 for x in row) for row in uniform.train_dataset["labels"]]  # type: ignore[index]
    assert mean_tokens == pytest.approx(sum(labelled) / len(labelled), abs=2.0)  # the turn's closing tokens aside
    assert uniform.tokens_per_step == pytest.approx(4 * mean_tokens)
    batch = next(iter(uniform.get_train_dataloader()))
    uniform.model.load_state_dict(batch_trainer.model.state_dict())
    for t in (uniform, batch_trainer):
        t.model.train()
    tokens = int((batch["labels"][:, 1:] != -100).sum())
    with torch.no_grad():
        summed = float(uniform.compute_loss(uniform.model, dict(batch))) * uniform.tokens_per_step
        mean = float(batch_trainer.compute_loss(batch_trainer.model, dict(batch), num_items_in_batch=tokens))
    assert summed == pytest.approx(mean * tokens, rel=1e-4)
    uniform.model.eval()  # evaluation keeps the per-batch mean
    with torch.no_grad():
        assert float(uniform.compute_loss(uniform.model, dict(batch), num_items_in_batch=tokens)) == \
            pytest.approx(mean, rel=1e-4)
