"""``make serve`` end to end: a real Prefect server and process worker (``python -m flows.serve start``, what the
Makefile runs) with a private PREFECT_HOME and a free port; the ``train-dgemm`` deployment started with the
Prefect CLI (``prefect deployment run``) against a git + DVC repository in tmp_path runs to COMPLETED; starting
twice starts nothing new; ``stop`` leaves no process behind.

Run: pytest -m integration tests/flows/test_deployment.py  (about a minute; most of it is Prefect starting up)
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from flows.agents_stack import free_port
from hpcrl_core.runtime_env import ROOT
from tests.flows.test_train_dgemm_flow import make_dvc_repo

pytestmark = pytest.mark.integration

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def serve(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "flows.serve", *args], cwd=ROOT, env=env, text=True,
                            capture_output=True, timeout=300)
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


def test_serve_deploy_run_and_stop(tmp_path: Path) -> None:
    home = tmp_path / "prefect-home"
    repo = make_dvc_repo(tmp_path / "repo")
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update(PREFECT_HOME=str(home), PREFECT_WORKER_QUERY_SECONDS="2")
    try:
        started = serve(env, "start", "--port", str(port))
        assert f"export PREFECT_API_URL={api_url}" in started.stdout
        pids = {name: int((home / "serve" / f"{name}.pid").read_text()) for name in ("server", "worker")}
        assert set(pids.values()) <= set(processes_with_home(home))  # the check after stop can see them
        again = serve(env, "start", "--port", str(port))
        assert again.stdout.count("already running") == 2
        assert pids == {name: int((home / "serve" / f"{name}.pid").read_text()) for name in ("server", "worker")}

        params = {"stages": ["first", "second"], "register": False, "repo_root": str(repo)}
        run = subprocess.run([sys.executable, "-m", "prefect", "deployment", "run", "train-dgemm/train-dgemm",
                              "--params", json.dumps(params)], env={**env, "PREFECT_API_URL": api_url}, cwd=tmp_path,
                             text=True, capture_output=True, timeout=120)
        match = re.search(r"UUID: ([0-9a-f-]{36})", run.stdout)
        assert run.returncode == 0 and match, f"{run.stdout}\n{run.stderr}"
        state = wait_for_final_state(api_url, match.group(1), timeout_s=180)
        worker_log = (home / "serve" / "worker.log").read_text()
        assert state == "COMPLETED", worker_log[-4000:]
        assert (repo / "second.txt").read_text() == "6"  # 3 * 2: both stages ran through dvc repro
        assert "stage second: ran" in worker_log and "train-dgemm summary" in worker_log
    finally:
        stopped = serve(env, "stop", check=False)
        left = processes_with_home(home)
        for pid in left:  # the safety net: never leave a server behind, even when stop is broken
            os.kill(pid, signal.SIGKILL)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert left == [], f"processes left after stop: {left}"
    assert not (home / "serve" / "server.pid").exists() and not (home / "serve" / "worker.pid").exists()
    assert "not running" in serve(env, "status", check=False).stdout
