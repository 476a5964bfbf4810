"""Tests of the MLflow wrapper against a real local store. Run: pytest tests/test_tracking.py"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcrl_core import tracking
from hpcrl_core.errors import ConfigError, DataError


def test_stage_run_logs_params_metrics_dicts_and_tags(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with tracking.stage_run("prepare", params={"race": {"per_pattern": 12}, "seed": 3}, tags={"x": "y"},
                            tracking_uri=uri) as run:
        tracking.log_metrics({"race_c": {"train": 90, "eval": 10}, "note": "skipped"})
        tracking.log_dict({"a": 1}, "cards/plp.json")
    got = mlflow.get_run(run.info.run_id)
    assert got.data.params == {"race.per_pattern": "12", "seed": "3"}
    assert got.data.metrics == {"race_c.train": 90.0, "race_c.eval": 10.0}
    assert got.data.tags["hpcrl.stage"] == "prepare" and got.data.tags["x"] == "y"
    assert "git_commit" in got.data.tags
    arts = [a.path for a in mlflow.MlflowClient(uri).list_artifacts(run.info.run_id, "cards")]
    assert arts == ["cards/plp.json"]


# --------------------------------------------------------------------------------------------------- registry


def _model(folder: Path, lora: bool = False) -> Path:
    """A saved-model folder as the RL stage writes it; registration never loads it, so small stand-in files do."""
    folder.mkdir(parents=True)
    (folder / ("adapter_config.json" if lora else "config.json")).write_text('{"model_type": "qwen2"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    return folder


def _report(gflops: float, verified: float) -> dict:
    rl = {"verified_rate": verified, "gflops_median": gflops, "gflops_best": gflops * 2, "winrate_vs_sft": 0.6,
          "status_counts": {"ok": 3, "compile_error": 1}}
    return {"sft": {"verified_rate": 0.5, "gflops_median": 1.0}, "rl": rl, "meta": {"model_dir": "x", "n": 4}}


@pytest.mark.parametrize(("challenger", "champion", "expected"), [
    ((5.0, 0.1), None, True),                 # no champion: the first version wins
    ((11.0, 0.80), (10.0, 0.80), True),       # faster, as correct
    ((11.0, 0.75), (10.0, 0.80), True),       # faster, verified rate down by exactly the slack
    ((11.0, 0.74), (10.0, 0.80), False),      # faster, but too many more wrong kernels
    ((10.0, 0.95), (10.0, 0.80), False),      # as fast: not strictly better
    ((9.0, 1.00), (10.0, 0.80), False),       # slower
])
def test_beats_needs_higher_gflops_and_at_most_a_small_drop_in_verified_rate(
        challenger: tuple[float, float], champion: tuple[float, float] | None, expected: bool) -> None:
    def flat(pair: tuple[float, float]) -> dict[str, float]:
        return {"rl.gflops_median": pair[0], "rl.verified_rate": pair[1]}

    assert tracking.beats(flat(challenger), flat(champion) if champion else None) is expected


def test_beats_refuses_a_champion_without_metrics() -> None:
    with pytest.raises(DataError, match="champion has no rl.gflops_median"):
        tracking.beats({"rl.gflops_median": 1.0, "rl.verified_rate": 1.0}, {"rl.verified_rate": 0.5})


def test_data_hash_covers_the_dgemm_jsonl_files_only(tmp_path: Path) -> None:
    (tmp_path / "dgemm").mkdir()
    (tmp_path / "dgemm" / "train.jsonl").write_text('{"a": 1}\n')
    (tmp_path / "dgemm" / "eval.jsonl").write_text('{"b": 2}\n')
    first = tracking.data_hash(tmp_path)
    assert first.startswith("sha256:") and len(first) == len("sha256:") + 64
    (tmp_path / "dgemm" / "card.md").write_text("not data")
    assert tracking.data_hash(tmp_path) == first
    (tmp_path / "dgemm" / "eval.jsonl").write_text('{"b": 3}\n')
    assert tracking.data_hash(tmp_path) != first
    with pytest.raises(DataError, match="no dgemm/\\*.jsonl under"):
        tracking.data_hash(tmp_path / "elsewhere")


@pytest.mark.parametrize(("content", "message"), [
    (None, "does not exist"),
    ("{not json", "is not JSON"),
    (json.dumps({"sft": {}, "meta": {}}), "has no 'rl' block \\(found \\['meta', 'sft'\\]\\)"),
    (json.dumps({"rl": {"gflops_median": 3.0, "verified_rate": "high"}}), "lacks numeric rl.verified_rate"),
])
def test_read_eval_report_names_what_is_wrong(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "eval_dgemm.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DataError, match=message):
        tracking.read_eval_report(path)


def test_check_model_dir_tells_models_from_adapters_and_rejects_other_folders(tmp_path: Path) -> None:
    assert tracking.check_model_dir(_model(tmp_path / "full")) == "hf_model"
    assert tracking.check_model_dir(_model(tmp_path / "lora", lora=True)) == "lora_adapter"
    with pytest.raises(ConfigError, match="does not exist"):
        tracking.check_model_dir(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no config.json"):
        tracking.check_model_dir(tmp_path / "empty")


def test_git_commit_is_unknown_outside_git(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert tracking.git_commit(tmp_path) == "unknown"


def test_registered_version_holds_files_metrics_tags_and_takes_aliases(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    assert tracking.get_alias("hpcrl-dgemm", "champion", uri) is None  # no registered model yet
    first = tracking.register_model_version(_model(tmp_path / "m1"), _report(10.0, 0.8), "sha256:abc",
                                            tags={"prefect_flow_run_id": "f1"}, tracking_uri=uri)
    assert (first.name, first.version) == ("hpcrl-dgemm", 1)
    assert tracking.get_alias("hpcrl-dgemm", "champion", uri) is None  # registering sets no alias
    tracking.set_alias(first.name, "challenger", first.version, uri)
    assert tracking.promote_if_better(first, uri) == tracking.Promotion(True, 1, None)
    got = tracking.get_version("hpcrl-dgemm", 1, uri)
    assert got.aliases == ("challenger", "champion")
    assert got.tags["data_hash"] == "sha256:abc" and got.tags["git_commit"] and got.tags["model_kind"] == "hf_model"
    assert got.tags["prefect_flow_run_id"] == "f1"
    assert got.metrics["rl.gflops_median"] == 10.0 and got.metrics["rl.status_counts.ok"] == 3.0
    assert not any(k.startswith("meta.") for k in got.metrics)
    assert got.source.endswith("/artifacts/model") and got.run_id == first.run_id
    run = mlflow.MlflowClient(uri).get_run(first.run_id)
    assert run.data.tags["hpcrl.stage"] == "register" and run.data.tags["data_hash"] == "sha256:abc"
    files = Path(mlflow.artifacts.download_artifacts("models:/hpcrl-dgemm@champion", dst_path=str(tmp_path / "dl"),
                                                     tracking_uri=uri))
    assert sorted(p.name for p in files.iterdir()) == ["chat_template.jinja", "config.json", "model.safetensors",
                                                       "tokenizer.json"]
    second = tracking.register_model_version(_model(tmp_path / "m2", lora=True), _report(12.0, 0.7), "sha256:abc",
                                             tracking_uri=uri)
    assert second.version == 2 and second.tags["model_kind"] == "lora_adapter"
    assert tracking.promote_if_better(second, uri) == tracking.Promotion(False, 1, 1)  # verified rate fell 0.1
    champion = tracking.get_alias("hpcrl-dgemm", "champion", uri)
    assert champion is not None and champion.version == 1 and champion.metrics["rl.verified_rate"] == 0.8
    with pytest.raises(mlflow.exceptions.MlflowException) as missing:  # a bad request is not an infrastructure fault
        tracking.get_version("hpcrl-dgemm", 9, uri)
    assert not isinstance(missing.value, tracking.TrackingInfraError)


def test_register_checks_the_model_folder_before_logging_anything(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with pytest.raises(ConfigError, match="missing does not exist"):
        tracking.register_model_version(tmp_path / "missing", _report(1.0, 1.0), "sha256:abc", tracking_uri=uri)
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()


def test_an_unreachable_server_is_a_retryable_infrastructure_error(monkeypatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    with pytest.raises(tracking.TrackingInfraError, match="http://127.0.0.1:9 failed"):
        tracking.get_alias("hpcrl-dgemm", "champion", "http://127.0.0.1:9")
