"""The offline baselines (hpcrl_core/training/offline.py): DPO, KTO and SimPO through TRL's own trainers from one SFT
start, with every config mistake stopped before training.

Run: ``.venv/bin/python -m pytest tests/training/test_offline.py -q``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from hpcrl_core.config import parse_params
from hpcrl_core.data.schema import assistant, messages
from hpcrl_core.errors import ConfigError, DataError
from hpcrl_core.models.tiny import build_tiny_model
from hpcrl_core.models.tokenizer import save_tokenizer
from hpcrl_core.provenance import model_hash
from hpcrl_core.training import offline
from hpcrl_core.training.run_record import RECORD_FILE, rewards_record
from tests.models import TINY, sample_tokenizer


def _params(method: str, shared: dict[str, Any] | None = None, **section: Any) -> Any:
    base = {"max_steps": 2, "per_device_train_batch_size": 4, "save_steps": 1, "learning_rate": 1e-3,
            "max_length": 256}
    return parse_params({"offline": {**base, **(shared or {}), method: section}})


@pytest.fixture
def inputs(tmp_path: Path) -> tuple[Path, Path]:
    pairs = tmp_path / "pairs.jsonl"
    rows = [{"prompt": messages("Answer briefly.", f"Is there a race in program {i}?"),
             "chosen": assistant("yes: two threads write x." if i % 2 else "no: each thread has its own x."),
             "rejected": assistant("no." if i % 2 else "yes."), "family": "race_c", "item_id": f"race_c-{i}",
             "chosen_reward": 1.0, "rejected_reward": 0.0} for i in range(6)]
    pairs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    sft = tmp_path / "sft" / "final"
    build_tiny_model(TINY, sample_tokenizer(), seed=3).save_pretrained(str(sft))
    save_tokenizer(sample_tokenizer(), sft)
    card = {"start": model_hash(sft), "rewards": rewards_record(parse_params({}))}  # what the preferences stage writes
    (tmp_path / "card.json").write_text(json.dumps(card))
    return pairs, sft


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.parametrize("method", ["dpo", "kto", "simpo"])
def test_each_method_trains_from_the_sft_start_and_saves_final(inputs: tuple[Path, Path], tmp_path: Path,
                                                                method: str) -> None:
    pairs, sft = inputs
    out = tmp_path / method
    result = offline.run_offline(_params(method), pairs, sft, out, [], method, seed=1)
    assert result["global_step"] == 2 and result["pairs"] == 6 and result["resumed_from"] is None
    final = Path(result["final_dir"])
    assert (final / "log_history.json").exists() and (final / "config.json").exists()
    record = json.loads((final / RECORD_FILE).read_text())
    assert (record["method"], record["seed"], record["kind"]) == (method, 1, "offline")
    assert record["start"] == record["pairs_start"] == model_hash(sft)
    assert record["rewards"]["rewards_hash"] == rewards_record(parse_params({}))["rewards_hash"]
    before, after = _weights(sft), _weights(final)
    assert any(not torch.equal(before[k], after[k]) for k in before)  # it trained
    assert torch.isfinite(torch.tensor(result["train_loss"]))


def test_trainer_configs_carry_the_method_and_the_section(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    pairs, sft = inputs
    simpo = offline.build_offline_trainer(_params("simpo", beta=2.5, gamma=0.7), pairs, sft, tmp_path / "s", [],
                                          "simpo", 2)
    assert (simpo.args.loss_type, simpo.args.cpo_alpha, simpo.args.simpo_gamma, simpo.args.beta) == \
        ("simpo", 0.0, 0.7, 2.5)
    assert simpo.args.seed == 2 and simpo.args.max_steps == 2
    kto = offline.build_offline_trainer(_params("kto"), pairs, sft, tmp_path / "k", [], "kto", 1)
    assert len(kto.train_dataset) == 12  # each pair: a desirable and an undesirable example
    dpo = offline.build_offline_trainer(_params("dpo", trl={"label_smoothing": 0.1}), pairs, sft, tmp_path / "d", [],
                                        "dpo", 1)
    assert dpo.args.label_smoothing == 0.1 and dpo.ref_model is not None  # a frozen copy of the start


def test_config_mistakes_stop_before_training(inputs: tuple[Path, Path], tmp_path: Path) -> None:
    pairs, sft = inputs
    with pytest.raises(ConfigError, match=r"offline.dpo.trl.lable_smoothing: not a field of DPOConfig.*did you mean "
                                          r"label_smoothing"):
        offline.build_offline_trainer(_params("dpo", trl={"lable_smoothing": 0.1}), pairs, sft, tmp_path, [], "dpo", 1)
    with pytest.raises(ConfigError, match="offline.simpo.trl.cpo_alpha: owned by the offline.simpo stage"):
        offline.build_offline_trainer(_params("simpo", trl={"cpo_alpha": 1.0}), pairs, sft, tmp_path, [], "simpo", 1)
    with pytest.raises(ConfigError, match="offline.kto.trl.beta: owned by the offline.kto stage; set it through "
                                          "offline.kto.beta"):
        offline.build_offline_trainer(_params("kto", trl={"beta": 0.5}), pairs, sft, tmp_path, [], "kto", 1)
    with pytest.raises(ConfigError, match="offline method 'orpo' is not known"):
        offline.build_offline_trainer(_params("dpo"), pairs, sft, tmp_path, [], "orpo", 1)
    with pytest.raises(ConfigError, match=r"offline.max_length: received 16, but the longest prompt \+ answer is"):
        offline.build_offline_trainer(_params("dpo", {"max_length": 16}), pairs, sft, tmp_path, [], "dpo", 1)
    pairs.write_text("")
    with pytest.raises(DataError, match="holds no preference pairs"):
        offline.build_offline_trainer(_params("dpo"), pairs, sft, tmp_path, [], "dpo", 1)
    with pytest.raises(ConfigError, match="seeds must be distinct"):
        parse_params({"offline": {"seeds": [1, 1]}})
    with pytest.raises(ConfigError, match="methods must name offline methods"):
        parse_params({"offline": {"methods": ["dpo", "ppo"]}})
    with pytest.raises(ConfigError, match="offline.max_steps"):
        offline.build_offline_trainer(_params("dpo", trl={"max_steps": 5}), pairs, sft, tmp_path, [], "dpo", 1)
