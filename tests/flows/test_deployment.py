"""``make serve`` end to end (``python -m flows.serve start``, what the Makefile runs) with a private PREFECT_HOME,
free ports and its own serve.env:

- the stack comes up (S3, MLflow with artifacts in S3, Prefect, workers of pools cpu and gpu, one CPU agent);
  starting twice starts nothing new; ``hpcrl status`` says every service is healthy;
- ``prefect deployment run 'train-dgemm/train-dgemm'`` against a git + DVC repository in tmp_path (the shipped
  params.yaml, one stage standing for training that leaves a saved model, its report and its data) runs to
  COMPLETED on the gpu pool's worker: the stage's MLflow run is on the server with its artifact in the S3 bucket, and
  the pipeline's register step made the model ``hpcrl-dgemm@champion`` there;
- the champion, loaded back from a shell that only loaded serve.env, has the saved model's weights;
- ``dvc push`` to the S3 remote, then ``dvc pull`` into a fresh git clone, restores data, checkpoint and report;
- ``stop`` leaves no process behind and removes serve.env.

And the refusals: wrong S3 credentials, a port already taken, a service that does not come up in time: a message
naming it, exit 1, nothing left running.

Run: pytest -m integration tests/flows/test_deployment.py  (about two minutes; most of it is servers starting up)
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from flows.agents_stack import S3_KEY, local_s3
from flows.serve import read_env_file
from flows.service import free_port
from hpcrl_core.runtime_env import ROOT

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
SERVICES = ("s3", "mlflow", "server", "cpu-worker", "gpu-worker", "agent")
# The one stage of the pipeline a deployment run executes in these tests: it stands for sft -> rl_dgemm ->
# evaluate_dgemm, leaving what they leave (a saved model, its evaluation report, the data it read), and logs an MLflow
# run as training stages do, wherever MLFLOW_TRACKING_URI points.
TRAIN = """\
import json
from pathlib import Path
import torch
from transformers import GPT2Config, GPT2LMHeadModel
from hpcrl_core import tracking
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=32))
model.save_pretrained("checkpoints/rl_dgemm/final")
Path("data/dgemm").mkdir(parents=True, exist_ok=True)
Path("data/dgemm/train.jsonl").write_text('{"prompt": "dgemm"}\\n')
block = {"verified_rate": 0.8, "gflops_median": 2.5, "gflops_best": 5.0, "best_vs_numpy": 0.1}
Path("reports").mkdir(exist_ok=True)
Path("reports/eval_dgemm.json").write_text(json.dumps({"sft": {**block, "gflops_median": 1.0},
                                                       "rl": {**block, "winrate_vs_sft": 0.7}, "meta": {}}))
with tracking.dvc_stage_run("train", params={"train": {"seed": 3}}, method="e2e") as run:
    tracking.log_metrics({"eval.gflops_median": 2.5})
    tracking.log_dict({"ok": True}, "reports/train.json")
Path("run_id.txt").write_text(run.info.run_id)
"""
# a shell that loaded serve.env loads the registered champion back (its files come from S3 through the server)
LOAD = """\
import json, sys
import mlflow, torch
from transformers import AutoModelForCausalLM
folder = mlflow.artifacts.download_artifacts("models:/hpcrl-dgemm@champion", dst_path=sys.argv[2])
saved, loaded = (AutoModelForCausalLM.from_pretrained(f) for f in (sys.argv[1], folder))
same = all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), loaded.state_dict().values()))
print(json.dumps({"same_weights": same}))
"""


def make_pipeline_repo(root: Path) -> Path:
    """A git + DVC repository with the shipped params.yaml and one stage ``train`` (``TRAIN``)."""
    root.mkdir(parents=True)
    (root / "train.py").write_text(TRAIN)
    (root / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    outs = ["checkpoints/rl_dgemm/final", "data/dgemm", "reports/eval_dgemm.json", "run_id.txt"]
    stage = {"cmd": f'"{sys.executable}" train.py', "deps": ["train.py"], "outs": outs}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"train": stage}}, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=root, check=True)
    return root


def serve(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "flows.serve", *args], cwd=ROOT, env=env, text=True,
                            capture_output=True, timeout=400)
    assert not check or result.returncode == 0, f"serve {args} failed:\n{result.stdout}\n{result.stderr}"
    return result


def processes_with_home(home: Path) -> list[int]:
    """Live processes whose environment holds this PREFECT_HOME: everything make serve started for the test."""
    needle = f"PREFECT_HOME={home}\0".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and needle in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                found += [] if state in ("Z", "X") else [int(entry.name)]
        except OSError:
            continue
    return found


def kill_leftovers(home: Path) -> list[int]:
    """The safety net: never leave a server behind, even when stop is broken; returns what was left."""
    left = processes_with_home(home)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return left


def wait_for_final_state(api_url: str, flow_run_id: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    state = "UNKNOWN"
    while time.monotonic() < deadline:
        response = httpx.get(f"{api_url}/flow_runs/{flow_run_id}", timeout=10)
        state = response.json()["state"]["type"] if response.status_code == 200 else state
        if state in FINAL:
            return state
        time.sleep(1)
    return f"{state} after {timeout_s:.0f} s"


def base_env(home: Path) -> dict[str, str]:
    """This environment without any stack settings, with the test's PREFECT_HOME."""
    drop = ("PREFECT_API_URL", "MLFLOW_TRACKING_URI", "MLFLOW_S3_ENDPOINT_URL", "HPCRL_S3_ENDPOINT_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("AWS_")}
    env.update(PREFECT_HOME=str(home), PREFECT_WORKER_QUERY_SECONDS="2")
    return env


def s3_keys(env: dict[str, str], bucket: str) -> list[str]:
    import boto3

    s3 = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], region_name=env["AWS_DEFAULT_REGION"],
                      aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=hpcrl", "-c", "user.email=hpcrl@localhost", *args], cwd=repo, check=True,
                   capture_output=True)


def test_serve_stack_end_to_end(tmp_path: Path) -> None:
    home, env_file = tmp_path / "prefect-home", tmp_path / "serve.env"
    repo = make_pipeline_repo(tmp_path / "repo")
    ports = [free_port() for _ in range(3)]
    args = ("start", "--port", str(ports[0]), "--mlflow-port", str(ports[1]), "--s3-port", str(ports[2]),
            "--env-file", str(env_file))
    env = base_env(home)
    try:
        started = serve(env, *args)
        stack = read_env_file(env_file)
        assert stack["PREFECT_API_URL"] == f"http://127.0.0.1:{ports[0]}/api", started.stdout
        assert stack["MLFLOW_TRACKING_URI"] == f"http://127.0.0.1:{ports[1]}"
        assert stack["AWS_ENDPOINT_URL"] == stack["MLFLOW_S3_ENDPOINT_URL"] == f"http://127.0.0.1:{ports[2]}"
        assert env_file.stat().st_mode & 0o077 == 0  # it holds the S3 secret
        # the link opens the experiment in MLflow's model-training view, not in its GenAI overview
        assert re.search(rf"MLflow UI +http://127.0.0.1:{ports[1]}/#/experiments/\d+/runs\?workflowType=machine_learning",
                         started.stdout), started.stdout
        pids = {name: int((home / "serve" / f"{name}.pid").read_text()) for name in SERVICES}
        assert set(pids.values()) <= set(processes_with_home(home))  # the check after stop can see them
        # again, asked for other ports: what runs keeps its ports, and serve.env says the same
        again = serve(env, "start", "--port", str(free_port()), "--mlflow-port", str(free_port()), "--s3-port",
                      str(free_port()), "--env-file", str(env_file))
        assert again.stdout.count("already running") == len(SERVICES), again.stdout
        assert "deployments: as applied to this server before" in again.stdout, again.stdout
        assert read_env_file(env_file) == stack
        assert pids == {name: int((home / "serve" / f"{name}.pid").read_text()) for name in SERVICES}
        status = subprocess.run([sys.executable, "-m", "flows.cli", "status"], cwd=ROOT, env=env, text=True,
                                capture_output=True, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert len(re.findall(r"^\S+\s+healthy\s", status.stdout, re.M)) == len(SERVICES), status.stdout
        assert "1 live agent(s)" in status.stdout

        # a deployment run: its stage logs to the MLflow server, its register step registers the model there
        client_env = {**env, **stack}
        params = {"stages": ["train"], "register": True, "repo_root": str(repo)}
        run = subprocess.run([sys.executable, "-m", "prefect", "deployment", "run", "train-dgemm/train-dgemm",
                              "--params", json.dumps(params)], env=client_env, cwd=tmp_path, text=True,
                             capture_output=True, timeout=120)
        match = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout)
        assert run.returncode == 0 and match, f"{run.stdout}\n{run.stderr}"
        state = wait_for_final_state(stack["PREFECT_API_URL"], match.group(1), timeout_s=300)
        worker_log = (home / "serve" / "gpu-worker.log").read_text()  # train-dgemm is bound to pool gpu
        assert state == "COMPLETED", worker_log[-4000:]
        assert "stage train: ran" in worker_log and "train-dgemm summary" in worker_log
        run_id = (repo / "run_id.txt").read_text()
        from mlflow import MlflowClient

        mlflow = MlflowClient(tracking_uri=stack["MLFLOW_TRACKING_URI"])
        logged = mlflow.get_run(run_id)
        assert logged.data.tags["hpcrl.stage"] == "train" and logged.data.tags["hpcrl.method"] == "e2e"
        assert logged.data.metrics["eval.gflops_median"] == 2.5 and logged.data.params["train.seed"] == "3"
        champion = mlflow.get_model_version_by_alias("hpcrl-dgemm", "champion")
        assert champion.version == "1" and champion.source.startswith("mlflow-artifacts:/"), champion
        objects = s3_keys(stack, "hpcrl-mlflow")
        assert any(k.endswith(f"{run_id}/artifacts/reports/train.json") for k in objects), objects
        assert any(k.endswith(f"{champion.run_id}/artifacts/model/model.safetensors") for k in objects), objects

        # the champion loaded back, from a shell that only loaded serve.env
        loaded = subprocess.run([sys.executable, "-c", LOAD, str(repo / "checkpoints/rl_dgemm/final"),
                                 str(tmp_path / "back")], cwd=tmp_path, env=client_env, text=True,
                                capture_output=True, timeout=180)
        assert loaded.returncode == 0, loaded.stderr[-3000:]
        assert json.loads(loaded.stdout.strip().splitlines()[-1]) == {"same_weights": True}

        # DVC: push the pipeline's outputs to the S3 remote, pull them into a fresh clone
        dvc = [sys.executable, "-m", "dvc"]
        subprocess.run([*dvc, "remote", "add", "-d", "lab", "s3://hpcrl-dvc/e2e"], cwd=repo, check=True)
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "pipeline")
        pushed = subprocess.run([*dvc, "push"], cwd=repo, env=client_env, text=True, capture_output=True, timeout=120)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert any(k.startswith("e2e/files/md5/") for k in s3_keys(stack, "hpcrl-dvc"))
        subprocess.run(["git", "clone", "-q", str(repo), str(tmp_path / "clone")], check=True)
        clone = tmp_path / "clone"
        assert not (clone / "checkpoints/rl_dgemm/final").exists()  # only its .gitignore came with git
        pulled = subprocess.run([*dvc, "pull"], cwd=clone, env=client_env, text=True, capture_output=True,
                                timeout=120)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert (clone / "run_id.txt").read_text() == run_id
        for rel in ("checkpoints/rl_dgemm/final/model.safetensors", "data/dgemm/train.jsonl",
                    "reports/eval_dgemm.json"):
            assert (clone / rel).read_bytes() == (repo / rel).read_bytes(), rel
    finally:
        stopped = serve(env, "stop", check=False)
        left = kill_leftovers(home)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert left == [], f"processes left after stop: {left}"
    assert not list((home / "serve").glob("*.pid")) and not env_file.exists()
    assert "not running" in serve(env, "status", check=False).stdout


def test_wrong_s3_credentials_are_named_and_nothing_is_left(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    env = base_env(home)
    with local_s3(tmp_path / "s3") as s3:
        env.update(HPCRL_S3_ENDPOINT_URL=s3["AWS_ENDPOINT_URL"], AWS_ACCESS_KEY_ID=S3_KEY,
                   AWS_SECRET_ACCESS_KEY="not-the-secret")
        try:
            refused = serve(env, "start", "--port", str(free_port()), "--mlflow-port", str(free_port()),
                            "--env-file", str(tmp_path / "serve.env"), check=False)
        finally:
            left = kill_leftovers(home)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"the S3 server at {s3['AWS_ENDPOINT_URL']} refuses the credentials (SignatureDoesNotMatch)" in \
        refused.stderr, refused.stderr
    assert left == [] and not list((home / "serve").glob("*.pid")) and not (tmp_path / "serve.env").exists()


def test_a_taken_port_is_named_and_what_started_is_stopped(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    env = base_env(home)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        try:
            refused = serve(env, "start", "--port", str(free_port()), "--mlflow-port", str(port), "--s3-port",
                            str(free_port()), "--env-file", str(tmp_path / "serve.env"), check=False)
        finally:
            left = kill_leftovers(home)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"port {port} (mlflow) is already taken" in refused.stderr, refused.stderr
    assert "s3: started" in refused.stdout and "s3: stopped again" in refused.stderr  # S3 came first: undone
    assert left == [] and not list((home / "serve").glob("*.pid")) and not (tmp_path / "serve.env").exists()


def test_a_service_that_does_not_come_up_is_named_and_everything_is_stopped(tmp_path: Path) -> None:
    """Two seconds are not enough for MLflow and Prefect to import and start: the start gives up on the first
    service not ready, says which and shows its log, and stops everything it had started."""
    home = tmp_path / "prefect-home"
    env = base_env(home)
    try:
        refused = serve(env, "start", "--port", str(free_port()), "--mlflow-port", str(free_port()), "--s3-port",
                        str(free_port()), "--timeout", "2", "--env-file", str(tmp_path / "serve.env"), check=False)
    finally:
        left = kill_leftovers(home)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert re.search(r"\b(mlflow|server) \(pid \d+\) was not healthy at http\S+ after 2 s", refused.stderr), \
        refused.stderr
    assert "stopped again" in refused.stderr and "nothing this start started is left running" in refused.stderr
    assert left == [] and not list((home / "serve").glob("*.pid")) and not (tmp_path / "serve.env").exists()
