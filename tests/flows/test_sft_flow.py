"""The sft flow on a real Prefect engine: trains a tiny policy, resumes after an interruption, starts over when its
inputs change, and logs to MLflow.

Run: pytest tests/flows/test_sft_flow.py
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from hpcrl_core.data.schema import Record, assistant, messages, read_jsonl, write_jsonl
from tests.training.test_sft import make_data, make_params

pytestmark = pytest.mark.integration


def _params_file(tmp_path: Path, **sft: object) -> Path:
    path = tmp_path / f"params-{len(list(tmp_path.glob('params-*')))}.yaml"
    params = make_params(**sft).model_dump(mode="json", include={"model", "sft"})
    params["evaluate"] = {"max_problems": 1, "samples_per_problem": 1, "dgemm_max_new_tokens": 16,
                          "qa_max_new_tokens": 8, "max_items_per_family": 2, "batch_size": 2}
    path.write_text(yaml.safe_dump(params))
    return path


def test_sft_flow_trains_resumes_and_restarts_on_new_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.testing.utilities import prefect_test_harness

    import mlflow
    from flows.sft import sft

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    data = make_data(tmp_path / "data")
    for family in ("race_c", "race_fortran"):  # race items carry their yes/no label as the answer
        path = data / family / "eval.jsonl"
        write_jsonl(path, [dataclasses.replace(r, answer=r.response.split(":")[0]) for r in read_jsonl(path)])
    out = tmp_path / "checkpoints" / "sft"
    with prefect_test_harness(server_startup_timeout=120):
        report = tmp_path / "reports" / "sft.json"
        first = sft(str(_params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out), str(report))
        assert first["global_step"] == 4 and first["resumed_from"] is None
        assert (out / "final").exists()
        written = json.loads(report.read_text())
        assert {"dgemm", "race", "mlperf", "plp", "meta"} <= set(written)
        assert 0 <= written["race"]["f1"] <= 1 and 0 <= written["mlperf"]["em"] <= 1
        # same inputs (as after a crash): the checkpoints are resumed, not thrown away
        again = sft(str(_params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out), str(report))
        assert again["resumed_from"] is not None and again["resumed_from"].endswith("checkpoint-4")
        # new data: the old checkpoints must not be continued
        write_jsonl(data / "plp" / "train.jsonl", [Record("plp", messages(None, f"New question {i}?"),
                                                          assistant(f"New answer {i}."), "") for i in range(4)])
        fresh = sft(str(_params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out), str(report))
        assert fresh["resumed_from"] is None and fresh["global_step"] == 4
    runs = mlflow.search_runs(experiment_names=["hpcrl"], filter_string="tags.`hpcrl.stage` = 'sft'")
    assert len(runs) == 3 and runs["metrics.train_loss"].notna().all()
    assert json.loads((out / "inputs.json").read_text())["fingerprint"]
