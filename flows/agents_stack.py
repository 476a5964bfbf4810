"""A throwaway agents stack: a Prefect server on a free port with a private home and CPU agents as separate
processes, for the integration test and ``benchmarks/bench_agents.py``. Everything it started is stopped on exit
(SIGTERM, then SIGKILL to each process group), and what their logs said is kept under ``home``.

    with agents_stack(home, params_file, agent_cores=[[0], [1]]) as stack:
        subprocess.run([...], env=stack.env)          # PREFECT_API_URL and the storage folder set

Test: ``pytest -m integration tests/tasks/test_agents.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flows.service import free_port, healthy, listening, rclone, terminate
from hpcrl_core.errors import HPCRLError
from hpcrl_core.runtime_env import ROOT
from tasks.bench_agent import HEARTBEAT_S, STALE_AFTER, VARIABLE_PREFIX


class StackError(HPCRLError):
    """The server or an agent did not come up."""


def read_heartbeats(url: str) -> list[dict[str, Any]]:
    """The agents' heartbeat records on the server at ``url`` (its REST API, no Prefect client)."""
    request = urllib.request.Request(f"{url}/variables/filter", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return [json.loads(v["value"]) for v in json.loads(response.read()) if v["name"].startswith(VARIABLE_PREFIX)]


def live_agents(url: str) -> list[dict[str, Any]]:
    """The heartbeat records of the agents that beat within the last ``STALE_AFTER`` heartbeats."""
    return [b for b in read_heartbeats(url) if time.time() - float(b["last_heartbeat"]) < STALE_AFTER * HEARTBEAT_S]


@dataclass
class Stack:
    home: Path
    env: dict[str, str]
    url: str
    params: Path
    agents: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start_agent(self, cores: Sequence[int], slots: int = 1,
                    env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start ``hpcrl agent --slots N --cores ...`` (log in ``home/agent-<n>.log``), ``env`` on top of the
        stack's."""
        log = open(self.home / f"agent-{len(self.agents)}.log", "wb")  # noqa: SIM115  the child holds it
        proc = subprocess.Popen([sys.executable, "-m", "flows.cli", "agent", "--slots", str(slots), "--cores",
                                 ",".join(map(str, cores)), "--params", str(self.params)], cwd=ROOT,
                                env={**self.env, **(env or {})},
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.agents.append(proc)
        return proc

    def stop_agents(self) -> None:
        """Stop every agent this stack started (SIGTERM, then SIGKILL to its process group) and forget them."""
        for proc in self.agents:
            if proc.poll() is None:
                terminate(proc.pid)
            proc.wait(timeout=30)
        self.agents.clear()

    def wait_for_agents(self, count: int, timeout_s: float = 180.0) -> list[dict[str, Any]]:
        """Wait until ``count`` agents this stack runs have a live heartbeat on the server; returns their heartbeat
        records. An agent stopped a moment ago still looks live for a few heartbeats: it is not counted (its pid is
        not one of ours any more). Raises ``StackError`` with the agents' logs."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ours = {p.pid for p in self.agents if p.poll() is None}
            beats = [b for b in live_agents(self.url) if b.get("pid") in ours]
            if len(beats) >= count:
                return beats
            if any(p.poll() is not None for p in self.agents):
                break
            time.sleep(0.3)
        logs = "\n".join(p.read_text(errors="replace")[-1500:] for p in sorted(self.home.glob("agent-*.log")))
        raise StackError(f"{count} agent(s) did not come up within {timeout_s:.0f} s; their logs end:\n{logs}")


@contextmanager
def agents_stack(home: Path, params: Path, agent_cores: Sequence[Sequence[int]] = (),
                 env: dict[str, str] | None = None, timeout_s: float = 180.0,
                 storage: Path | None = None) -> Iterator[Stack]:
    """A server and one agent per entry of ``agent_cores`` (each with one slot), waited for; stopped on exit.

    Args:
        home: PREFECT_HOME of the stack (logs, database, result storage).
        params: the params file the agents read (their ``bench`` section).
        agent_cores: the cores of each agent to start.
        env: the environment to start from (default: this process's, without PREFECT_* settings).
        storage: the result store folder of the agents and clients (default ``home/storage``).
    """
    base = {k: v for k, v in (env or os.environ).items() if not k.startswith("PREFECT_")}
    port = free_port()
    url = f"http://127.0.0.1:{port}/api"
    base.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="true",
                PREFECT_LOGGING_LEVEL="WARNING")
    if storage is not None:
        base["PREFECT_LOCAL_STORAGE_PATH"] = str(storage)
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "server.log", "wb") as log:
        server = subprocess.Popen([sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                                   "--port", str(port)], env=base, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    stack = Stack(home, {**base, "PREFECT_API_URL": url}, url, params)
    try:
        deadline = time.monotonic() + timeout_s
        while not healthy(url):
            if server.poll() is not None or time.monotonic() > deadline:
                raise StackError(f"the Prefect server did not become healthy at {url}; "
                                 f"{home / 'server.log'} ends:\n{(home / 'server.log').read_text()[-1500:]}")
            time.sleep(0.5)
        for cores in agent_cores:
            stack.start_agent(cores)
        if agent_cores:
            stack.wait_for_agents(len(agent_cores), timeout_s)
        yield stack
    finally:
        stack.stop_agents()
        if server.poll() is None:
            terminate(server.pid)
        server.wait(timeout=30)


S3_KEY, S3_SECRET = "hpcrl-test-key", "hpcrl-test-secret"


@contextmanager
def local_s3(root: Path, buckets: Sequence[str] = ("hpcrl",), timeout_s: float = 30.0) -> Iterator[dict[str, str]]:
    """An S3-compatible server on a free port (``rclone serve s3``: one folder per bucket under ``root``), for
    tests and benchmarks; yields the ``AWS_*`` environment that reaches it (boto3, s3fs and Prefect's
    ``RemoteFileSystem`` read it). Stopped on exit."""
    for bucket in buckets:
        (root / bucket).mkdir(parents=True, exist_ok=True)
    port = free_port()
    with open(root.parent / f"{root.name}-rclone.log", "wb") as log:
        proc = subprocess.Popen([rclone(), "serve", "s3", "--auth-key", f"{S3_KEY},{S3_SECRET}", "--addr",
                                 f"127.0.0.1:{port}", str(root)], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if listening(port):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise StackError(f"rclone serve s3 did not listen on port {port}")
            time.sleep(0.1)
        yield {"AWS_ACCESS_KEY_ID": S3_KEY, "AWS_SECRET_ACCESS_KEY": S3_SECRET,
               "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_DEFAULT_REGION": "us-east-1"}
    finally:
        if proc.poll() is None:
            terminate(proc.pid)
        proc.wait(timeout=30)
