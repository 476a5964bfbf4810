"""The sft flow on a real Prefect engine: trains a tiny policy, resumes after an interruption, starts over when its
inputs change, and logs to MLflow; and the same stage with ``model.source: hf`` on a local checkpoint plus LoRA.

Run: pytest tests/flows/test_sft_flow.py
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from hpcrl_core.data.schema import Record, assistant, messages, read_jsonl, write_jsonl
from tests.models import TINY, sample_tokenizer
from tests.training.test_sft import make_data, make_params

pytestmark = pytest.mark.integration


def params_file(tmp_path: Path, model: dict | None = None, **sft: object) -> Path:
    """A params.yaml with the tiny test model (or ``model``), ``sft`` overrides and a very small evaluation."""
    path = tmp_path / f"params-{len(list(tmp_path.glob('params-*')))}.yaml"
    params = make_params(**sft).model_dump(mode="json", include={"model", "sft"})
    if model is not None:
        params["model"] = model
    params["evaluate"] = {"max_problems": 1, "samples_per_problem": 1, "dgemm_max_new_tokens": 16,
                          "qa_max_new_tokens": 8, "max_items_per_family": 2, "batch_size": 2}
    path.write_text(yaml.safe_dump(params))
    return path


def flow_data(root: Path) -> Path:
    """make_data, with the race eval items labelled (their answer is yes or no) as the evaluation needs."""
    data = make_data(root)
    for family in ("race_c", "race_fortran"):  # race items carry their yes/no label as the answer
        path = data / family / "eval.jsonl"
        write_jsonl(path, [dataclasses.replace(r, answer=r.response.split(":")[0]) for r in read_jsonl(path)])
    return data


def test_sft_flow_trains_resumes_and_restarts_on_new_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            prefect_server: None) -> None:
    import mlflow
    from flows.sft import sft

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    data = flow_data(tmp_path / "data")
    out = tmp_path / "checkpoints" / "sft"
    report = tmp_path / "reports" / "sft.json"
    first = sft(str(params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out), str(report))
    assert first["global_step"] == 4 and first["resumed_from"] is None
    assert (out / "final").exists()
    written = json.loads(report.read_text())
    assert {"dgemm", "race", "mlperf", "plp", "meta"} <= set(written)
    assert 0 <= written["race"]["f1"] <= 1 and 0 <= written["mlperf"]["em"] <= 1
    # same inputs (as after a crash): the checkpoints are resumed, not thrown away
    again = sft(str(params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out), str(report))
    assert again["resumed_from"] is not None and again["resumed_from"].endswith("checkpoint-4")
    # new data: the old checkpoints must not be continued
    write_jsonl(data / "plp" / "train.jsonl", [Record("plp", messages(None, f"New question {i}?"),
                                                      assistant(f"New answer {i}."), "") for i in range(4)])
    fresh = sft(str(params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out), str(report))
    assert fresh["resumed_from"] is None and fresh["global_step"] == 4
    runs = mlflow.search_runs(experiment_names=["hpcrl"], filter_string="tags.`hpcrl.stage` = 'sft'")
    assert len(runs) == 3 and runs["metrics.train_loss"].notna().all()
    # named and tagged for the UI's filters; newest first: the last run read the new data
    assert set(runs["tags.mlflow.runName"]) == {"sft"} and set(runs["tags.hpcrl.method"]) == {"sft"}
    assert set(runs["tags.comparison"]) == {"dgemm"} and (runs["tags.hpcrl.seed"] == runs["params.sft.seed"]).all()
    hashes = runs["tags.data_hash"]
    assert hashes.str.startswith("sha256:").all() and hashes.iloc[0] != hashes.iloc[-1]
    params = [c.removeprefix("params.") for c in runs.columns if c.startswith("params.")]
    assert params and all(c.split(".")[0] in ("sft", "model") for c in params), params  # none of TRL's arguments
    assert json.loads((out / "inputs.json").read_text())["fingerprint"]


def test_sft_flow_on_a_local_hf_checkpoint_with_lora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      prefect_server: None) -> None:
    """``model.source: hf`` through the whole stage: the checkpoint brings its own tokenizer, only LoRA adapters
    train, and the evaluation loads the saved adapter on its base model."""
    from safetensors.torch import load_file

    from flows.sft import sft
    from hpcrl_core.models.tiny import build_tiny_model
    from hpcrl_core.models.tokenizer import save_tokenizer

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    base = tmp_path / "base-model"
    build_tiny_model(TINY, sample_tokenizer(), seed=3).save_pretrained(str(base))
    save_tokenizer(sample_tokenizer(), base)
    model = {"source": "hf", "hf": {"path": str(base)},
             "lora": {"enabled": True, "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]}}
    data = flow_data(tmp_path / "data")
    out = tmp_path / "checkpoints" / "sft"
    report = tmp_path / "reports" / "sft.json"
    result = sft(str(params_file(tmp_path, model=model, max_steps=3, learning_rate=1e-2)), str(data), str(out),
                 str(report))
    assert result["global_step"] == 3
    final = Path(result["final_dir"])
    assert (final / "adapter_config.json").is_file() and not (final / "model.safetensors").exists()
    adapter = load_file(str(final / "adapter_model.safetensors"))
    assert adapter and all("lora_" in k for k in adapter)
    assert any(float(t.abs().sum()) > 0 for k, t in adapter.items() if "lora_B" in k)  # the adapters trained
    written = json.loads(report.read_text())
    assert written["meta"]["model_dir"] == str(final) and 0 <= written["race"]["f1"] <= 1
