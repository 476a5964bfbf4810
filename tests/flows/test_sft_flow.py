"""The sft flow on a real Prefect engine: trains a tiny policy, resumes after an interruption, starts over when its
inputs change, and logs to MLflow.

Run: pytest tests/flows/test_sft_flow.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hpcrl_core.data.schema import Record, assistant, messages, write_jsonl
from tests.training.test_sft import make_data, make_params

pytestmark = pytest.mark.integration


def _params_file(tmp_path: Path, **sft: object) -> Path:
    path = tmp_path / f"params-{len(list(tmp_path.glob('params-*')))}.yaml"
    params = make_params(**sft).model_dump(mode="json", include={"model", "sft"})
    path.write_text(yaml.safe_dump(params))
    return path


def test_sft_flow_trains_resumes_and_restarts_on_new_inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.testing.utilities import prefect_test_harness

    import mlflow
    from flows.sft import sft

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/mlflow.db")
    data = make_data(tmp_path / "data")
    out = tmp_path / "checkpoints" / "sft"
    with prefect_test_harness(server_startup_timeout=120):
        first = sft(str(_params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out))
        assert first["global_step"] == 4 and first["resumed_from"] is None
        assert (out / "final").exists()
        # same inputs (as after a crash): the checkpoints are resumed, not thrown away
        again = sft(str(_params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out))
        assert again["resumed_from"] is not None and again["resumed_from"].endswith("checkpoint-4")
        # new data: the old checkpoints must not be continued
        write_jsonl(data / "plp" / "train.jsonl", [Record("plp", messages(None, f"New question {i}?"),
                                                          assistant(f"New answer {i}."), "") for i in range(4)])
        fresh = sft(str(_params_file(tmp_path, max_steps=4, save_steps=2)), str(data), str(out))
        assert fresh["resumed_from"] is None and fresh["global_step"] == 4
    runs = mlflow.search_runs(experiment_names=["hpcrl"], filter_string="tags.`hpcrl.stage` = 'sft'")
    assert len(runs) == 3 and runs["metrics.train_loss"].notna().all()
    assert json.loads((out / "inputs.json").read_text())["fingerprint"]
