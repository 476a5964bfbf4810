"""The register flow on a real Prefect engine and a real MLflow SQLite store: the first model becomes champion, a
worse one stays challenger, a better one takes the champion alias; bad inputs fail before anything is registered.

Run: pytest tests/flows/test_register_flow.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core.errors import ConfigError, DataError

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh MLflow SQLite store in ``tmp_path``, which is also the working folder (artifacts go to ./mlruns)."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data" / "dgemm").mkdir(parents=True)
    (tmp_path / "data" / "dgemm" / "train.jsonl").write_text('{"prompt": "dgemm"}\n')
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())  # the shipped promotion policy
    return uri


def model(folder: Path) -> str:
    """A saved-model folder (registration never loads it, so small stand-in files do)."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2", "marker": folder.name}))
    (folder / "model.safetensors").write_bytes(b"\0" * 32)
    (folder / "tokenizer_config.json").write_text("{}")
    return str(folder)


def report(path: Path, gflops: float, verified: float) -> str:
    block = {"verified_rate": verified, "gflops_median": gflops, "gflops_best": 2 * gflops, "best_vs_numpy": 0.1}
    path.write_text(json.dumps({"sft": {**block, "gflops_median": 1.0}, "rl": {**block, "winrate_vs_sft": 0.7},
                                "meta": {"suite": "eval"}}))
    return str(path)


def test_register_keeps_the_better_model_as_champion(tmp_path: Path, store: str, prefect_server: None) -> None:
    import mlflow
    from flows.register import main, register

    first = register(model(tmp_path / "m1"), report(tmp_path / "r1.json", 10.0, 0.80), "data")
    assert first == {"name": "hpcrl-dgemm", "version": 1, "aliases": ["challenger", "champion"], "promoted": True,
                     "champion_version": 1, "already_registered": False}
    # the pipeline reruns with an unchanged model: no second version of the same weights
    again = register(str(tmp_path / "m1"), str(tmp_path / "r1.json"), "data")
    assert again["version"] == 1 and again["already_registered"] and not again["promoted"]
    worse = register(model(tmp_path / "m2"), report(tmp_path / "r2.json", 8.0, 0.90), "data")
    assert worse == {"name": "hpcrl-dgemm", "version": 2, "aliases": ["challenger"], "promoted": False,
                     "champion_version": 1, "already_registered": False}
    # the command line DVC runs; faster, and a verified rate within 0.05 of the champion's
    assert main(["--model", model(tmp_path / "m3"), "--report", report(tmp_path / "r3.json", 12.0, 0.76)]) == 0
    client = mlflow.MlflowClient(store)
    assert int(client.get_model_version_by_alias("hpcrl-dgemm", "champion").version) == 3
    assert int(client.get_model_version_by_alias("hpcrl-dgemm", "challenger").version) == 3
    assert client.get_model_version("hpcrl-dgemm", "1").aliases == []
    # a stricter policy in params.yaml: faster, but the verified rate fell 0.04, more than a slack of 0.01
    (tmp_path / "strict.yaml").write_text("registry:\n  verified_slack: 0.01\n")
    strict = register(model(tmp_path / "m4"), report(tmp_path / "r4.json", 13.0, 0.72), "data",
                      params_path=str(tmp_path / "strict.yaml"))
    assert strict["version"] == 4 and not strict["promoted"] and strict["champion_version"] == 3
    for v in ("1", "2", "3", "4"):
        version = client.get_model_version("hpcrl-dgemm", v)
        assert version.tags["data_hash"].startswith("sha256:") and version.tags["git_commit"]
        assert version.tags["prefect_flow_run_id"]
        run = client.get_run(version.run_id)
        assert run.data.metrics["rl.gflops_median"] == {"1": 10.0, "2": 8.0, "3": 12.0, "4": 13.0}[v]
        assert "rl.winrate_vs_sft" in run.data.metrics and run.data.tags["git_commit"] == version.tags["git_commit"]
        files = {a.path for a in client.list_artifacts(version.run_id, "model")}
        assert {"model/config.json", "model/model.safetensors", "model/tokenizer_config.json"} <= files
    served = mlflow.artifacts.download_artifacts("models:/hpcrl-dgemm@champion", dst_path=str(tmp_path / "dl"),
                                                 tracking_uri=store)
    assert json.loads((Path(served) / "config.json").read_text())["marker"] == "m3"


def test_bad_inputs_fail_before_anything_is_registered(tmp_path: Path, store: str, prefect_server: None) -> None:
    import mlflow
    from flows.register import register

    good_model, good_report = model(tmp_path / "m"), report(tmp_path / "r.json", 10.0, 0.8)
    with pytest.raises(DataError, match="missing.json does not exist"):
        register(good_model, str(tmp_path / "missing.json"), "data")
    (tmp_path / "sft_only.json").write_text(json.dumps({"sft": {"gflops_median": 1.0}, "meta": {}}))
    with pytest.raises(DataError, match="has no 'rl' block"):
        register(good_model, str(tmp_path / "sft_only.json"), "data")
    with pytest.raises(ConfigError, match="nowhere does not exist"):
        register(str(tmp_path / "nowhere"), good_report, "data")
    with pytest.raises(DataError, match="no dgemm/\\*.jsonl under"):
        register(good_model, good_report, str(tmp_path / "no-data"))
    client = mlflow.MlflowClient(store)
    assert client.search_registered_models() == []
    assert not client.search_runs([e.experiment_id for e in client.search_experiments()])

