"""Run records (hpcrl_core/training/run_record.py): every run names its start and rewards, and the comparison refuses
runs that do not share them.

Run: pytest tests/training/test_run_record.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.config import parse_params
from hpcrl_core.errors import DataError
from hpcrl_core.provenance import model_hash
from hpcrl_core.training.run_record import RECORD_FILE, check_runs, rewards_record, write_run_record


def _model(folder: Path, weights: bytes) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(weights)
    return folder


@pytest.fixture
def start(tmp_path: Path) -> Path:
    return _model(tmp_path / "sft" / "final", b"the start's weights")


def _pairs(tmp_path: Path, start: Path, **params: object) -> Path:
    pairs = tmp_path / "preferences" / "pairs.jsonl"
    pairs.parent.mkdir(exist_ok=True)
    pairs.write_text('{"prompt": []}\n')
    card = {"start": model_hash(start), "rewards": rewards_record(parse_params(params))}
    (pairs.parent / "card.json").write_text(json.dumps(card))
    return pairs


def test_runs_of_one_start_and_one_reward_pass(tmp_path: Path, start: Path) -> None:
    params = parse_params({})
    finals = {"hargo": {1: tmp_path / "h1", 2: tmp_path / "h2"}, "dpo": {1: tmp_path / "d1"}}
    for seed, folder in finals["hargo"].items():
        write_run_record(folder, method="hargo", seed=seed, kind="online", start_dir=start, params=params)
    write_run_record(finals["dpo"][1], method="dpo", seed=1, kind="offline", start_dir=start, params=params,
                     pairs=_pairs(tmp_path, start))
    summary = check_runs(start, finals)
    assert summary["runs"] == 3 and summary["start"] == model_hash(start)
    assert summary["rewards_hash"] == rewards_record(params)["rewards_hash"]
    assert summary["rewards"]["task_reward"]["plp_bonus"] == 0.1


def test_another_start_other_rewards_or_a_moved_folder_are_named(tmp_path: Path, start: Path) -> None:
    params = parse_params({})
    other = _model(tmp_path / "other", b"other weights")
    write_run_record(tmp_path / "grpo1", method="grpo", seed=1, kind="online", start_dir=other, params=params)
    write_run_record(tmp_path / "ppo1", method="ppo", seed=1, kind="online", start_dir=start,
                     params=parse_params({"task_reward": {"plp_bonus": 0.3}}))
    write_run_record(tmp_path / "hargo1", method="hargo", seed=1, kind="online", start_dir=start, params=params)
    write_run_record(tmp_path / "kto1", method="kto", seed=1, kind="offline", start_dir=start, params=params,
                     pairs=_pairs(tmp_path, other))
    finals = {"hargo": {1: tmp_path / "hargo1"}, "grpo": {1: tmp_path / "grpo1"}, "ppo": {1: tmp_path / "ppo1"},
              "kto": {1: tmp_path / "kto1"}, "dr_grpo": {1: tmp_path / "hargo1"}}
    with pytest.raises(DataError) as err:
        check_runs(start, finals)
    text = str(err.value)
    assert "grpo-1: started from" in text and "ppo-1: trained toward other rewards" in text
    assert "kto-1: trained on pairs sampled from another model" in text
    assert "dr_grpo-1: its record says hargo-1" in text and "hargo-1:" not in text.replace("says hargo-1", "")


def test_a_run_without_a_record_or_a_card_is_refused(tmp_path: Path, start: Path) -> None:
    (tmp_path / "old").mkdir()
    with pytest.raises(DataError, match="cannot read the run's record"):
        check_runs(start, {"grpo": {1: tmp_path / "old"}})
    (tmp_path / "old" / RECORD_FILE).write_text('{"method": "grpo"}')
    with pytest.raises(DataError, match="not a run record"):
        check_runs(start, {"grpo": {1: tmp_path / "old"}})
    pairs = _pairs(tmp_path, start)
    (pairs.parent / "card.json").write_text('{"pairs": 3}')
    with pytest.raises(DataError, match="records no start and rewards"):
        write_run_record(tmp_path / "d", method="dpo", seed=1, kind="offline", start_dir=start,
                         params=parse_params({}), pairs=pairs)
