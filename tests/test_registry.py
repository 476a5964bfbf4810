"""Tests of the model registry against a real local MLflow store. Run: pytest tests/test_registry.py"""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcrl_core import provenance, registry
from hpcrl_core.errors import ConfigError, TrackingInfraError
from hpcrl_core.evaluation.promotion import report_metrics


def _model(folder: Path, lora: bool = False) -> Path:
    """A saved-model folder as the RL stage writes it; registration never loads it, so small stand-in files do."""
    folder.mkdir(parents=True)
    (folder / ("adapter_config.json" if lora else "config.json")).write_text('{"model_type": "qwen2"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    return folder


def _register(folder: Path, gflops: float, verified: float, uri: str,
              tags: dict[str, str] | None = None) -> registry.ModelVersionInfo:
    report = _report(gflops, verified)
    return registry.register_model_version(folder, report_metrics(report), report, "hpcrl-dgemm",
                                           {**provenance.model_tags(folder, _data(folder.parent)), **(tags or {})},
                                           tracking_uri=uri)


def _data(root: Path) -> Path:
    (root / "data" / "dgemm").mkdir(parents=True, exist_ok=True)
    (root / "data" / "dgemm" / "train.jsonl").write_text('{"prompt": "dgemm"}\n')
    return root / "data"


def _report(gflops: float, verified: float) -> dict:
    rl = {"verified_rate": verified, "gflops_median": gflops, "gflops_best": gflops * 2, "winrate_vs_sft": 0.6,
          "status_counts": {"ok": 3, "compile_error": 1}}
    return {"sft": {"verified_rate": 0.5, "gflops_median": 1.0}, "rl": rl, "meta": {"model_dir": "x", "n": 4}}


def test_registered_version_holds_files_metrics_tags_and_takes_aliases(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert registry.get_alias("hpcrl-dgemm", "champion", uri) is None  # no registered model yet
    first = _register(_model(tmp_path / "m1"), 10.0, 0.8, uri, tags={"prefect_flow_run_id": "f1"})
    assert (first.name, first.version) == ("hpcrl-dgemm", 1)
    assert registry.get_alias("hpcrl-dgemm", "champion", uri) is None  # registering sets no alias
    registry.set_alias(first.name, "challenger", first.version, uri)
    registry.set_alias(first.name, "champion", first.version, uri)
    got = registry.get_version("hpcrl-dgemm", 1, uri)
    assert got.aliases == ("challenger", "champion")
    assert got.tags["data_hash"] == provenance.data_hash(tmp_path / "data") and got.tags["git_commit"]
    assert got.tags["model_kind"] == "hf_model" and got.tags["model_hash"] == provenance.model_hash(tmp_path / "m1")
    assert got.tags["prefect_flow_run_id"] == "f1"
    assert got.metrics["rl.gflops_median"] == 10.0 and got.metrics["rl.status_counts.ok"] == 3.0
    assert not any(k.startswith("meta.") for k in got.metrics)
    assert got.source.endswith("/artifacts/model") and got.run_id == first.run_id
    run = mlflow.MlflowClient(uri).get_run(first.run_id)
    assert run.data.tags["hpcrl.stage"] == "register" and run.data.tags["data_hash"] == got.tags["data_hash"]
    files = Path(mlflow.artifacts.download_artifacts("models:/hpcrl-dgemm@champion", dst_path=str(tmp_path / "dl"),
                                                     tracking_uri=uri))
    assert sorted(p.name for p in files.iterdir()) == ["chat_template.jinja", "config.json", "model.safetensors",
                                                       "tokenizer.json"]
    second = _register(_model(tmp_path / "m2", lora=True), 12.0, 0.7, uri)
    assert second.version == 2 and second.tags["model_kind"] == "lora_adapter"
    assert registry.find_version("hpcrl-dgemm", "model_hash", second.tags["model_hash"], uri) == \
        registry.get_version("hpcrl-dgemm", 2, uri)
    assert registry.find_version("hpcrl-dgemm", "model_hash", "sha256:none", uri) is None
    registry.set_alias("hpcrl-dgemm", "challenger", 2, uri)  # moves the alias away from version 1
    champion = registry.get_alias("hpcrl-dgemm", "champion", uri)
    assert champion is not None and champion.version == 1 and champion.metrics["rl.verified_rate"] == 0.8
    assert registry.get_version("hpcrl-dgemm", 1, uri).aliases == ("champion",)
    with pytest.raises(mlflow.exceptions.MlflowException) as missing:  # a bad request is not an infrastructure fault
        registry.get_version("hpcrl-dgemm", 9, uri)
    assert not isinstance(missing.value, TrackingInfraError)


def test_register_checks_the_model_folder_before_logging_anything(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with pytest.raises(ConfigError, match="missing does not exist"):
        registry.register_model_version(tmp_path / "missing", {}, _report(1.0, 1.0), "hpcrl-dgemm", {},
                                        tracking_uri=uri)
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def test_an_unreachable_server_is_a_retryable_infrastructure_error(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    with pytest.raises(TrackingInfraError, match="http://127.0.0.1:9 failed"):
        registry.get_alias("hpcrl-dgemm", "champion", "http://127.0.0.1:9")
