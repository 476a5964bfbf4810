"""``make serve`` end to end (``python -m flows.serve start``, what the Makefile runs) with a private PREFECT_HOME,
free ports and its own serve.env:

- the stack comes up (S3, MLflow with artifacts in S3, Prefect, workers of pools cpu and gpu, one CPU agent);
  starting twice starts nothing new; ``hpcrl status`` says every service is healthy;
- ``prefect deployment run 'train-dgemm/train-dgemm'`` against a git + DVC repository in tmp_path runs to COMPLETED,
  and one of its stages logs an MLflow run to the server whose artifact lands in the S3 bucket;
- a model registered from a shell that only loaded serve.env is loaded back from S3 with the same weights;
- ``dvc push`` to the S3 remote, then ``dvc pull`` into a fresh git clone, restores the pipeline's outputs;
- ``stop`` leaves no process behind and removes serve.env.

And the refusals: wrong S3 credentials, a port already taken: a message naming it, exit 1, nothing left running.

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
from flows.service import free_port
from hpcrl_core.runtime_env import ROOT
from tests.flows.test_train_dgemm_flow import make_dvc_repo

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
SERVICES = ("s3", "mlflow", "server", "cpu-worker", "gpu-worker", "agent")
# the stage a deployment run executes: logs an MLflow run, as training stages do, wherever MLFLOW_TRACKING_URI points
TRACKED = '''\
from pathlib import Path
from hpcrl_core import tracking
with tracking.dvc_stage_run("tracked", params={"tracked": {"seed": 3}}, method="e2e") as run:
    tracking.log_metrics({"eval.gflops_median": 2.5})
    tracking.log_dict({"ok": True}, "reports/tracked.json")
Path("tracked.txt").write_text(run.info.run_id)
'''
# a shell that loaded serve.env registers a tiny model and loads it back through the registry
REGISTER = '''\
import json, sys
from pathlib import Path
import mlflow, torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel
from hpcrl_core import tracking
torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=32))
model.save_pretrained(sys.argv[1])
version = tracking.register_model_version(Path(sys.argv[1]), {"eval.gflops_median": 2.5}, {"ok": True},
                                          "hpcrl-e2e", {"model_kind": "test"})
tracking.set_alias("hpcrl-e2e", "champion", version.version)
folder = mlflow.artifacts.download_artifacts("models:/hpcrl-e2e@champion", dst_path=sys.argv[2])
loaded = AutoModelForCausalLM.from_pretrained(folder)
same = all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
print(json.dumps({"version": version.version, "source": version.source, "same_weights": same}))
'''


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


def read_env_file(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


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
    repo = make_dvc_repo(tmp_path / "repo")
    (repo / "track.py").write_text(TRACKED)
    pipeline = yaml.safe_load((repo / "dvc.yaml").read_text())
    pipeline["stages"]["tracked"] = {"cmd": f'"{sys.executable}" track.py', "deps": ["track.py"],
                                     "outs": ["tracked.txt"]}
    (repo / "dvc.yaml").write_text(yaml.safe_dump(pipeline, sort_keys=False))
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
        pids = {name: int((home / "serve" / f"{name}.pid").read_text()) for name in SERVICES}
        assert set(pids.values()) <= set(processes_with_home(home))  # the check after stop can see them
        again = serve(env, *args)
        assert again.stdout.count("already running") == len(SERVICES), again.stdout
        assert pids == {name: int((home / "serve" / f"{name}.pid").read_text()) for name in SERVICES}
        status = subprocess.run([sys.executable, "-m", "flows.cli", "status"], cwd=ROOT, env=env, text=True,
                                capture_output=True, timeout=60)
        assert status.returncode == 0, status.stdout + status.stderr
        assert len(re.findall(r"^\S+\s+healthy\s", status.stdout, re.M)) == len(SERVICES), status.stdout
        assert "1 live agent(s)" in status.stdout

        # a deployment run, its stages logging to the MLflow server
        client_env = {**env, **stack}
        params = {"stages": ["first", "second", "tracked"], "register": False, "repo_root": str(repo)}
        run = subprocess.run([sys.executable, "-m", "prefect", "deployment", "run", "train-dgemm/train-dgemm",
                              "--params", json.dumps(params)], env=client_env, cwd=tmp_path, text=True,
                             capture_output=True, timeout=120)
        match = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout)
        assert run.returncode == 0 and match, f"{run.stdout}\n{run.stderr}"
        state = wait_for_final_state(stack["PREFECT_API_URL"], match.group(1), timeout_s=240)
        worker_log = (home / "serve" / "gpu-worker.log").read_text()
        assert state == "COMPLETED", worker_log[-4000:]
        assert (repo / "second.txt").read_text() == "6"  # 3 * 2: both stages ran through dvc repro
        assert "stage second: ran" in worker_log and "train-dgemm summary" in worker_log
        run_id = (repo / "tracked.txt").read_text()
        from mlflow import MlflowClient

        logged = MlflowClient(tracking_uri=stack["MLFLOW_TRACKING_URI"]).get_run(run_id)
        assert logged.data.tags["hpcrl.stage"] == "tracked" and logged.data.tags["hpcrl.method"] == "e2e"
        assert logged.data.metrics["eval.gflops_median"] == 2.5 and logged.data.params["tracked.seed"] == "3"
        mlflow_objects = s3_keys(stack, "hpcrl-mlflow")
        assert any(k.endswith(f"{run_id}/artifacts/reports/tracked.json") for k in mlflow_objects), mlflow_objects

        # the registry, from a shell that only loaded serve.env
        registered = subprocess.run([sys.executable, "-c", REGISTER, str(tmp_path / "model"), str(tmp_path / "back")],
                                    cwd=tmp_path, env=client_env, text=True, capture_output=True, timeout=180)
        assert registered.returncode == 0, registered.stderr[-3000:]
        version = json.loads(registered.stdout.strip().splitlines()[-1])
        assert version["same_weights"] is True and version["source"].startswith("mlflow-artifacts:/"), version
        assert any(k.endswith("artifacts/model/model.safetensors") for k in s3_keys(stack, "hpcrl-mlflow"))

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
        assert not (clone / "second.txt").exists()
        pulled = subprocess.run([*dvc, "pull"], cwd=clone, env=client_env, text=True, capture_output=True,
                                timeout=120)
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        assert (clone / "second.txt").read_text() == "6" and (clone / "tracked.txt").read_text() == run_id
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
