"""Tests of the MLflow wrapper against a real local store. Run: pytest tests/test_tracking.py"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any

from hpcrl_core import provenance, tracking
from hpcrl_core.processes import this_process


def test_dvc_stage_run_logs_params_metrics_dicts_and_tags(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with tracking.dvc_stage_run("prepare", params={"race": {"per_pattern": 12}, "seed": 3}, tags={"x": "y"},
                            tracking_uri=uri) as run:
        tracking.log_metrics({"race_c": {"train": 90, "eval": 10}, "note": "skipped"})
        tracking.log_dict({"a": 1}, "cards/plp.json")
    got = mlflow.get_run(run.info.run_id)
    assert got.data.params == {"race.per_pattern": "12", "seed": "3"}
    assert got.data.metrics == {"race_c.train": 90.0, "race_c.eval": 10.0}
    assert got.data.tags["hpcrl.stage"] == "prepare" and got.data.tags["x"] == "y"
    assert "git_commit" in got.data.tags
    assert got.data.tags["hpcrl.pid"] == str(os.getpid()) and got.data.tags["hpcrl.host"] == socket.gethostname()
    arts = [a.path for a in mlflow.MlflowClient(uri).list_artifacts(run.info.run_id, "cards")]
    assert arts == ["cards/plp.json"]


# A stage process killed with SIGKILL: it starts its run (with a run file, as sft and rl_dgemm do), logs steps
# 1..3 and dies without ending the run.
CRASH = textwrap.dedent("""
    import os, signal, sys
    from pathlib import Path
    from hpcrl_core import tracking
    with tracking.dvc_stage_run(sys.argv[1], params={"seed": 1}, run_file=Path(sys.argv[2])):
        for step in (1, 2, 3):
            tracking.log_metrics({"loss": 1.0 / step}, step=step)
        os.kill(os.getpid(), signal.SIGKILL)
""")


def _crash(tmp_path: Path, dvc_stage: str, run_file: Path) -> str:
    proc = subprocess.run([sys.executable, "-c", CRASH, dvc_stage, str(run_file)], cwd=tmp_path, timeout=300,
                          env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"})
    assert proc.returncode == -signal.SIGKILL
    return json.loads(run_file.read_text())["run_id"]


def test_a_run_left_running_by_a_dead_process_is_closed_by_the_next_start(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    dead = _crash(tmp_path, "sft", tmp_path / "run.json")
    assert client.get_run(dead).info.status == "RUNNING"  # what a SIGKILL leaves behind
    experiment = client.get_experiment_by_name(tracking.EXPERIMENT).experiment_id
    me = socket.gethostname()

    def running(**tags: str) -> str:
        return client.create_run(experiment, tags={"hpcrl.stage": "sft", **tags}).info.run_id

    elsewhere = running(**{"hpcrl.host": "another-node", "hpcrl.pid": "1"})  # cannot be checked from here
    untagged = running()  # made before runs recorded their process
    live = running(**{"hpcrl.host": me, "hpcrl.pid": str(os.getpid()), "hpcrl.pid_start": this_process().start})
    reused = running(**{"hpcrl.host": me, "hpcrl.pid": str(os.getpid()), "hpcrl.pid_start": "1"})  # pid reused
    other_stage = running(**{"hpcrl.stage": "rl_dgemm", "hpcrl.host": me, "hpcrl.pid": "999999999"})
    with tracking.dvc_stage_run("sft", tracking_uri=uri) as run:
        pass
    status = {r: client.get_run(r).info.status for r in (dead, elsewhere, untagged, live, reused, other_stage)}
    assert status == {dead: "KILLED", elsewhere: "RUNNING", untagged: "RUNNING", live: "RUNNING", reused: "KILLED",
                      other_stage: "RUNNING"}  # another stage's runs wait for that stage's next start
    assert "died before it ended the run" in client.get_run(dead).data.tags["hpcrl.closed_reason"]
    assert client.get_run(dead).info.end_time is not None
    assert client.get_run(run.info.run_id).info.status == "FINISHED"


def test_a_resumed_stage_continues_its_run(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    run_file = tmp_path / "checkpoints" / "rl_dgemm" / tracking.RUN_FILE
    run_file.parent.mkdir(parents=True)
    crashed = _crash(tmp_path, "rl_dgemm", run_file)
    with tracking.dvc_stage_run("rl_dgemm", params={"seed": 1}, tracking_uri=uri, run_file=run_file,
                                resume=True) as run:
        for step in (4, 5):
            tracking.log_metrics({"loss": 1.0 / step}, step=step)
    assert run.info.run_id == crashed  # one run, not a RUNNING one beside a new one
    got = client.get_run(crashed)
    assert got.info.status == "FINISHED" and got.data.tags["hpcrl.resumes"] == "1"
    assert "hpcrl.closed_reason" not in got.data.tags and got.data.tags["hpcrl.pid"] == str(os.getpid())
    assert [m.step for m in client.get_metric_history(crashed, "loss")] == [1, 2, 3, 4, 5]
    assert len(client.search_runs([got.info.experiment_id])) == 1
    # a finished run is not reopened, and a stage that starts over (no checkpoint: resume=False) starts a new run
    with tracking.dvc_stage_run("rl_dgemm", tracking_uri=uri, run_file=run_file, resume=True) as again:
        pass
    with tracking.dvc_stage_run("rl_dgemm", tracking_uri=uri, run_file=run_file) as fresh:
        pass
    assert len({crashed, again.info.run_id, fresh.info.run_id}) == 3
    assert json.loads(run_file.read_text())["run_id"] == fresh.info.run_id
    # a run file naming a run of another store (the folder came from `dvc pull`) starts a new run too
    run_file.write_text(json.dumps({"run_id": "0" * 32, "dvc_stage": "rl_dgemm"}))
    with tracking.dvc_stage_run("rl_dgemm", tracking_uri=uri, run_file=run_file, resume=True) as other:
        pass
    assert other.info.run_id not in (crashed, again.info.run_id, fresh.info.run_id)


# --------------------------------------------------------------------------------- what the MLflow UI compares


def test_a_stage_run_is_named_tagged_and_logs_its_params_by_section(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    (tmp_path / "data" / "plp").mkdir(parents=True)
    prompts = [tmp_path / "data" / "plp" / "train.jsonl", tmp_path / "data" / "race_c.jsonl"]
    for f in prompts:
        f.write_text('{"prompt": "p"}\n')
    params = {"rl_hargo": {"learning_rate": 1e-5, "seed": 7, "trl": {"top_k": 4}}, "task_reward": {"tie": 0.5}}
    with tracking.dvc_stage_run("rl_hargo@hargo-7", params=params, tracking_uri=uri, method="hargo",
                                data=[*prompts, tmp_path / "data" / "missing.jsonl"]) as run:
        pass
    got = mlflow.MlflowClient(uri).get_run(run.info.run_id)
    assert got.info.run_name == "rl_hargo@hargo-7"
    assert got.data.params == {"rl_hargo.learning_rate": "1e-05", "rl_hargo.seed": "7", "rl_hargo.trl.top_k": "4",
                               "task_reward.tie": "0.5"}
    tags = got.data.tags
    assert (tags["hpcrl.stage"], tags["hpcrl.method"], tags["hpcrl.seed"]) == ("rl_hargo@hargo-7", "hargo", "7")
    assert tags["git_commit"] == provenance.git_commit()
    assert tags["data_hash"] == provenance.data_hash(tmp_path / "data", ("plp/train.jsonl", "race_c.jsonl"))
    prompts[0].write_text('{"prompt": "other"}\n')  # other data, another hash; a seed given beats the params'
    with tracking.dvc_stage_run("rl_hargo@hargo-7", params={**params, "seed": 2}, tracking_uri=uri, seed=3,
                                data=prompts) as again:
        pass
    tags = mlflow.MlflowClient(uri).get_run(again.info.run_id).data.tags
    assert tags["hpcrl.seed"] == "3" and tags["data_hash"] != got.data.tags["data_hash"]
    assert "hpcrl.method" not in tags  # not known: not guessed


def test_the_seed_tag_comes_from_the_params_top_level_first() -> None:
    assert tracking.run_tags(seed=tracking._params_seed({"sft": {"seed": 5}, "model": {"seed": 9}})) == \
        {"hpcrl.seed": "5"}
    assert tracking._params_seed({"offline": {"seed": 1234}, "seed": 2}) == 2
    assert tracking._params_seed({"evaluate": {"max_problems": 3}}) is None and tracking.run_tags() == {}


def test_the_experiment_is_marked_as_model_training_unless_someone_chose_a_kind(tmp_path: Path, monkeypatch) -> None:
    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    with tracking.dvc_stage_run("sft", tracking_uri=uri):
        pass
    experiment = client.get_experiment_by_name(tracking.EXPERIMENT)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    client.set_experiment_tag(experiment.experiment_id, "mlflow.experimentKind", "genai_development")  # from the UI
    with tracking.dvc_stage_run("sft", tracking_uri=uri):
        pass
    assert client.get_experiment(experiment.experiment_id).tags["mlflow.experimentKind"] == "genai_development"


def test_ui_links_open_the_model_training_view() -> None:
    assert tracking.experiment_url("http://h:5000/", "3") == \
        "http://h:5000/#/experiments/3/runs?workflowType=machine_learning"
    link = tracking.compare_url("http://h:5000", ["a1", "b2"], ["3"])
    query = urllib.parse.parse_qs(link.split("#/compare-runs?", 1)[1])
    assert json.loads(query["runs"][0]) == ["a1", "b2"] and json.loads(query["experiments"][0]) == ["3"]
    assert query["workflowType"] == ["machine_learning"]


def _tiny_trainer(tmp_path: Path, report_to: list[str]) -> Any:
    """A transformers Trainer on a 1-layer Qwen2 with TRL's SFTConfig as its arguments (what the stages build)."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Trainer
    from trl import SFTConfig

    from hpcrl_core.training.trl_options import device_options

    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16))
    rows = [{"input_ids": torch.arange(8) % 32, "labels": torch.arange(8) % 32} for _ in range(4)]
    args = SFTConfig(output_dir=str(tmp_path / "out"), report_to=report_to, max_steps=1, per_device_train_batch_size=2,
                     logging_steps=1, save_strategy="no", learning_rate=3e-4, **device_options())
    return Trainer(model=model, args=args, train_dataset=rows)


def test_trl_arguments_go_to_an_artifact_not_to_the_params(tmp_path: Path, monkeypatch) -> None:
    from transformers.integrations import MLflowCallback

    import mlflow
    from hpcrl_core.training.mlflow_callback import TRL_ARGS_ARTIFACT, HpcrlMLflowCallback, use_hpcrl_mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = mlflow.MlflowClient(uri)
    trainer = use_hpcrl_mlflow(_tiny_trainer(tmp_path, ["mlflow"]))
    assert [type(cb) for cb in trainer.callback_handler.callbacks if isinstance(cb, MLflowCallback)] == \
        [HpcrlMLflowCallback]
    with tracking.dvc_stage_run("sft", params={"sft": {"learning_rate": 3e-4}}, tracking_uri=uri) as run:
        trainer.train()
    got = client.get_run(run.info.run_id)
    assert got.data.params == {"sft.learning_rate": "0.0003"}  # hpcrl's own, nothing of TRL's hundreds
    assert "loss" in got.data.metrics  # the callback still logs the training curves into the stage's run
    path = mlflow.artifacts.download_artifacts(run_id=run.info.run_id, artifact_path=TRL_ARGS_ARTIFACT,
                                               tracking_uri=uri)
    logged = json.loads(Path(path).read_text())
    assert logged["config_class"] == "SFTConfig" and logged["training_arguments"]["learning_rate"] == 3e-4
    assert logged["training_arguments"]["max_steps"] == 1 and logged["model_config"]["hidden_size"] == 16
    plain = use_hpcrl_mlflow(_tiny_trainer(tmp_path, []))  # no MLflow asked: none added
    assert not any(isinstance(cb, MLflowCallback) for cb in plain.callback_handler.callbacks)


def test_transformers_mlflow_callback_still_logs_params_through_the_hook_we_bend(tmp_path: Path, monkeypatch) -> None:
    """What ``HpcrlMLflowCallback`` relies on: transformers' setup logs every argument as params through
    ``self._ml_flow``. Should transformers change that, this fails (and TRL's args may flood the params again)."""
    from transformers import TrainerState
    from transformers.integrations import MLflowCallback

    import mlflow

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    trainer = _tiny_trainer(tmp_path, [])
    with tracking.dvc_stage_run("sft", tracking_uri=uri) as run:
        callback = MLflowCallback()
        assert callback._ml_flow is mlflow
        callback.setup(trainer.args, TrainerState(), trainer.model)
    params = mlflow.MlflowClient(uri).get_run(run.info.run_id).data.params
    assert len(params) > 100 and {"learning_rate", "accelerator_config", "hidden_size"} <= set(params)
