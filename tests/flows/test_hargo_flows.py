"""The HARGO chain's flows on a real Prefect engine and a real MLflow SQLite store, on tiny inputs: the start point
is trained and reports its bars, two methods train from it and resume, preference pairs are sampled from it and DPO
trains on them, the comparison is evaluated into
eval_hargo.json/.md/.png with one MLflow run per (method, seed), and the hargo run is registered as hpcrl-hargo.

Run: pytest tests/flows/test_hargo_flows.py  (about a minute)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hpcrl_core.config import parse_params
from hpcrl_core.data.families import prepare_qa, prepare_race
from hpcrl_core.data.prepare import write_outputs
from hpcrl_core.errors import DataError
from hpcrl_core.provenance import model_hash

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]

SMALL: dict[str, Any] = {
    "prepare": {"race": {"tsan": False, "per_pattern": 2, "eval_pairs": 1}},
    "model": {"tokenizer": {"vocab_size": 600}},
    "sft_hargo": {"families": ["race_c", "race_fortran", "mlperf", "plp"], "max_steps": 3, "save_steps": 2,
                  "eval_steps": 100, "logging_steps": 1, "max_length": 1024,
                  "tiny": {"hidden_size": 32, "num_heads": 2, "num_kv_heads": 2, "intermediate_size": 64}},
    "rl_hargo": {"methods": ["grpo", "hargo", "ppo"], "seeds": [1], "max_steps": 2, "per_device_train_batch_size": 4,
                 "num_generations": 2, "max_completion_length": 8, "save_steps": 1, "max_items_per_family": 3},
    "preferences": {"samples": 4, "temperature": 1.5, "max_new_tokens": 8},  # random text: PLP cosines differ
    "offline": {"methods": ["dpo"], "seeds": [1], "max_steps": 2, "per_device_train_batch_size": 2, "save_steps": 1},
    "hpcgpt": {"seeds": [1], "epochs": 1, "per_device_train_batch_size": 64},
    "evaluate_hargo": {"max_items_per_family": 3, "max_new_tokens": 6, "bootstrap_resamples": 200},
}


@pytest.fixture()
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder with small params, the task families' data and a fresh MLflow store."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(SMALL))
    p = parse_params(SMALL).prepare
    write_outputs([prepare_race("c", p), prepare_race("fortran", p), prepare_qa("mlperf", p), prepare_qa("plp", p)],
                  tmp_path / "data")
    return tmp_path


def test_the_hargo_chain_trains_compares_and_registers(repo: Path, prefect_server: None) -> None:
    import mlflow
    from flows.evaluate_hargo import evaluate_hargo
    from flows.hpcgpt import hpcgpt
    from flows.offline import offline
    from flows.preferences import preferences
    from flows.register import register
    from flows.rl_hargo import rl_hargo
    from flows.sft_hargo import sft_hargo

    start = sft_hargo("params.yaml", "data", "checkpoints/sft_hargo", "reports/sft_hargo.json")
    assert start["global_step"] == 3 and (repo / "checkpoints/sft_hargo/final/config.json").is_file()
    bars = json.loads((repo / "reports/sft_hargo.json").read_text())
    assert set(bars["meets"]) == {"race_f1", "mlperf_avg_score", "plp_similarity"} and not bars["meets_all"]

    with pytest.raises(DataError, match="rl_hargo@grpo-1"):  # evaluation before training names what is missing
        evaluate_hargo(report="reports/eval_hargo.json")
    for method in ("grpo", "hargo", "ppo"):
        run = rl_hargo(method, 1)
        assert run["global_step"] == 2 and run["method"] == method
    state = json.loads((repo / "checkpoints/rl_hargo/hargo-1/final/hargo_state.json").read_text())
    assert state["estimator"] == "hargo" and isinstance(state["ema"], float)
    assert (repo / "checkpoints/rl_hargo/ppo-1/final/value_head.safetensors").is_file()

    with pytest.raises(DataError, match=r"offline@dpo-1 \(checkpoints/offline/dpo-1/final\)"):
        evaluate_hargo(report="reports/eval_hargo.json")
    card = preferences()
    assert card["total"]["prompts"] == 12 and card["total"]["pairs"] >= 1  # the same 3 prompts per family as RL
    dpo = offline("dpo", 1)
    assert dpo["global_step"] == 2 and dpo["pairs"] == card["total"]["pairs"]

    with pytest.raises(DataError, match=r"hpcgpt@1 \(checkpoints/hpcgpt/hpcgpt-1/final\)"):
        evaluate_hargo(report="reports/eval_hargo.json")
    second = hpcgpt(1)  # one epoch of the task families' train records, from random initialisation
    assert second["records"] > 64 and second["global_step"] == -(-second["records"] // 64)
    record = json.loads((repo / "checkpoints/hpcgpt/hpcgpt-1/final/run_record.json").read_text())
    assert record["kind"] == "supervised" and record["start"] is None and len(record["data"]) == 4

    report = evaluate_hargo(report="reports/eval_hargo.json")
    assert set(report) == {"sft", "grpo", "hargo", "ppo", "dpo", "hpcgpt", "meta"}
    assert report["meta"]["items"]["all"] == 12
    shared = report["meta"]["provenance"]  # every run's own record names the same start and rewards
    assert shared["runs"] == 5 and shared["start"] == model_hash(repo / "checkpoints/sft_hargo/final")
    assert set(report["hargo"]["metrics"]["winrate"]) == {"mean", "seeds", "ci"}
    assert (repo / "reports/eval_hargo.md").read_text().count("|") > 10
    assert (repo / "reports/eval_hargo.png").read_bytes()[:4] == b"\x89PNG"

    runs = mlflow.search_runs(experiment_names=["hpcrl"], filter_string='tags.comparison = "hargo"')
    names = set(runs["tags.mlflow.runName"])
    assert {"rl_hargo@grpo-1", "rl_hargo@hargo-1", "evaluate_hargo@grpo-1", "evaluate_hargo@hargo-1", "preferences",
            "offline@dpo-1", "evaluate_hargo@dpo-1", "hpcgpt@1", "evaluate_hargo@hpcgpt-1", "evaluate_hargo"} <= names
    assert set(runs["tags.method"].dropna()) == {"grpo", "hargo", "ppo", "dpo", "hpcgpt"}
    trained = runs[runs["tags.mlflow.runName"].str.match(r"(rl_hargo|offline|hpcgpt)@")]
    assert len(trained) == 5 and (trained["tags.hpcrl.method"] == trained["tags.method"]).all()
    assert set(trained["tags.hpcrl.seed"]) == {"1"} and trained["tags.data_hash"].str.startswith("sha256:").all()
    online = trained[trained["tags.hpcrl.stage"].str.startswith("rl_hargo@")]
    assert online["tags.data_hash"].nunique() == 1  # the same prompts for every method
    params = [c.removeprefix("params.") for c in runs.columns if c.startswith("params.") and
              runs[c].notna().any()]
    assert "_name_or_path" not in params and "learning_rate" not in params  # TRL's arguments went to an artifact
    evaluated = mlflow.search_runs(experiment_names=["hpcrl"],
                                   filter_string="tags.`hpcrl.method` = 'hargo' AND tags.kind = 'evaluation'")
    assert list(evaluated["tags.mlflow.runName"]) == ["evaluate_hargo@hargo-1"]
    assert evaluated["metrics.winrate"].notna().all()

    registered = register("checkpoints/rl_hargo/hargo-1/final", "reports/eval_hargo.json", "data",
                          params_path="params.yaml", section="registry_hargo")
    assert registered["name"] == "hpcrl-hargo" and registered["promoted"] and "champion" in registered["aliases"]
