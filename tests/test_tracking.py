"""Tests of the MLflow wrapper against a real local store. Run: pytest tests/test_tracking.py"""

from __future__ import annotations

from pathlib import Path

from hpcrl_core import tracking


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
