"""The parts of ``make serve`` that need no server: prefect.yaml read into pipelines (and refused when malformed),
pid files that point at somebody else's process, the port probe, the services' order, serve.env's mode.

Run: pytest tests/flows/test_serve_units.py  (a few seconds)
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flows import deploy, serve
from flows.service import Service, alive, port_free, read_pid, spawn, stop_service
from hpcrl_core.errors import ConfigError


def test_prefect_yaml_binds_training_to_gpu_and_evaluation_to_cpu() -> None:
    pipelines = deploy.load_pipelines()
    assert {name: p.pool for name, p in pipelines.items()} == {"train-dgemm": "gpu", "train-hargo": "gpu",
                                                               "evaluate": "cpu"}
    assert pipelines["evaluate"].env == {"HPCRL_BENCH_BACKEND": "agents"}
    for p in pipelines.values():
        path, func = p.entrypoint.split(":")
        assert f"def {func}(" in (deploy.ROOT / path).read_text()
    assert deploy.POOLS == ("cpu", "gpu") and [w.name for w in serve.WORKERS] == ["cpu-worker", "gpu-worker"]


@pytest.mark.parametrize("doc, fault", [
    ({"deployments": []}, "declares no deployments"),
    ({"deployments": [{"name": "x", "entrypoint": "flows/x.py", "work_pool": {"name": "cpu"}}]}, "entrypoint"),
    ({"deployments": [{"name": "x", "entrypoint": "flows/x.py:x"}]}, "work_pool.name"),
    ({"deployments": ["train"]}, "needs name"),
])
def test_a_malformed_prefect_yaml_is_named(tmp_path: Path, doc: dict, fault: str) -> None:
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=fault):
        deploy.load_pipelines(path)
    with pytest.raises(ConfigError, match="cannot read"):
        deploy.load_pipelines(tmp_path / "missing.yaml")


def test_stop_leaves_a_process_that_is_not_ours_alone(tmp_path: Path) -> None:
    """A pid file whose pid now belongs to another program (pids are reused) is forgotten, never signalled."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        mlflow = Service("mlflow", b"mlflow")
        mlflow.pid_file(tmp_path).write_text(f"{other.pid}\n")
        assert stop_service(mlflow, tmp_path) == (None, [])
        assert alive(other.pid) and not mlflow.pid_file(tmp_path).exists()
    finally:
        other.kill()
        other.wait()


def test_a_service_is_found_by_its_pid_file_and_stopped_with_its_children(tmp_path: Path) -> None:
    sleeper = Service("sleeper", b"sleeper-marker")
    code = "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)  # sleeper-marker"
    pid = spawn(sleeper, tmp_path, [sys.executable, "-c", code], {"PATH": "/usr/bin:/bin"})
    assert read_pid(sleeper, tmp_path) == pid
    stopped, left = stop_service(sleeper, tmp_path)
    assert stopped == pid and left == [] and not alive(pid)
    assert read_pid(sleeper, tmp_path) is None and "sleeper-marker" in sleeper.log_file(tmp_path).read_text()


def test_port_probe_sees_a_listener() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert not port_free(port)
    assert port_free(port)


def test_serve_env_is_private_and_stop_removes_only_ours(tmp_path: Path) -> None:
    env_file = tmp_path / "serve.env"
    serve.write_env_file(env_file, {"AWS_SECRET_ACCESS_KEY": "s", "PREFECT_API_URL": "http://x/api"}, tmp_path)
    assert env_file.stat().st_mode & 0o777 == 0o600
    text = env_file.read_text()
    assert text.startswith(serve.ENV_HEADER) and "AWS_SECRET_ACCESS_KEY=s\n" in text
    assert serve.read_env_file(env_file) == {"AWS_SECRET_ACCESS_KEY": "s", "PREFECT_API_URL": "http://x/api"}
    assert serve.read_env_file(tmp_path / "gone.env") == {}
    assert [s.name for s in serve.STOP_ORDER] == ["agent", "cpu-worker", "gpu-worker", "server", "mlflow", "s3"]


def test_stop_also_stops_the_worker_of_the_former_layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stack started before pools cpu and gpu left ``worker.pid``; the new ``make stop`` stops that worker too."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    d = serve.serve_dir()
    d.mkdir()
    legacy = serve.LEGACY[0]
    pid = spawn(legacy, d, [sys.executable, "-c", "import time; time.sleep(60)  # prefect worker"], {})
    assert serve.stop() and not alive(pid) and read_pid(legacy, d) is None


def test_deployments_are_applied_again_after_a_change_or_to_another_server(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprint a second start compares before skipping the deployments: the same for the same server and
    files, another for another server process, a changed prefect.yaml or a changed entrypoint file."""
    spec, flow_file = tmp_path / "prefect.yaml", tmp_path / "flow.py"
    spec.write_text("deployments: []\n")
    flow_file.write_text("def f(a: int) -> None: ...\n")
    monkeypatch.setattr(serve, "PREFECT_YAML", spec)
    monkeypatch.setattr(serve, "ROOT", tmp_path)
    monkeypatch.setattr(serve, "PIPELINES", {"p": deploy.Pipeline("flow.py:f", "cpu")})
    first = serve.deployments_fingerprint(101)
    assert serve.deployments_fingerprint(101) == first and serve.deployments_fingerprint(102) != first
    flow_file.write_text("def f(a: int, b: int = 0) -> None: ...\n")
    second = serve.deployments_fingerprint(101)
    spec.write_text("deployments: [{}]\n")
    assert len({first, second, serve.deployments_fingerprint(101)}) == 3


def test_stop_forgets_the_applied_deployments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started after ``stop`` may get the old one's pid: the record of what it held goes with it."""
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    d = serve.serve_dir()
    d.mkdir()
    (d / serve.DEPLOYED).write_text("abc\n")
    assert serve.stop() and not (d / serve.DEPLOYED).exists()
