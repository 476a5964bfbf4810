"""``make serve`` / ``make stop``: a local Prefect server (127.0.0.1, port 4200 by default) and a process worker for
the ``hpcrl-local`` pool, in the background, with the ``train-dgemm`` and ``train-hargo`` deployments created or
updated in between.

Pid files and logs live in ``$PREFECT_HOME/serve/`` (``.prefect/serve/`` by default): ``server.pid``,
``server.log``, ``server.url``, ``worker.pid``, ``worker.log``. Starting again reuses what still runs (no
duplicates) and only refreshes the deployment; stopping sends SIGTERM to each process group (twice: a Prefect worker
exits only on the second), then SIGKILL to whatever is left, flow runs the worker started included.

Run: ``python -m flows.serve start [--port 4200] [--pool hpcrl-local]``, ``... stop``, ``... status``.
Test: ``pytest -m integration tests/flows/test_deployment.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from flows.deploy import DEPLOYMENT, POOL
from hpcrl_core.errors import HPCRLError
from hpcrl_core.runtime_env import ROOT

NAMES = ("worker", "server")  # stop order: the worker first, so that it does not outlive its server


class ServeError(HPCRLError):
    """The server or the worker did not come up."""


def serve_dir() -> Path:
    return Path(os.environ["PREFECT_HOME"]).expanduser() / "serve"


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a live process, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces and parentheses
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (flow runs a worker started sit in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _proc_stat(int(entry.name))):
            children.setdefault(stat[1], []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def read_pid(name: str) -> int | None:
    """The pid of our ``name`` process if it still runs; a stale pid file is removed."""
    path = serve_dir() / f"{name}.pid"
    try:
        pid = int(path.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        pid, cmdline = 0, b""
    if pid and alive(pid) and b"prefect" in cmdline:
        return pid
    path.unlink(missing_ok=True)
    return None


def _spawn(name: str, argv: list[str], env: dict[str, str]) -> int:
    d = serve_dir()
    with open(d / f"{name}.log", "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    (d / f"{name}.pid").write_text(f"{proc.pid}\n")
    return proc.pid


def log_tail(name: str, lines: int = 30) -> str:
    try:
        return "\n".join((serve_dir() / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def healthy(api_url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=3) as response:
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


def _wait(what: str, name: str, pid: int, check: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        if not alive(pid):
            raise ServeError(f"the {name} (pid {pid}) exited before {what}; {serve_dir() / name}.log ends:\n"
                             f"{log_tail(name)}")
        if time.monotonic() > deadline:
            raise ServeError(f"the {name} (pid {pid}) was not {what} after {timeout_s:.0f} s; raise --timeout on a "
                             f"loaded machine. {serve_dir() / name}.log ends:\n{log_tail(name)}")
        time.sleep(0.5)


def worker_online(api_url: str, pool: str, worker: str) -> bool:
    """True once the worker has sent its first heartbeat to the server."""
    body = json.dumps({"workers": {"status": {"any_": ["ONLINE"]}}}).encode()
    request = urllib.request.Request(f"{api_url}/work_pools/{pool}/workers/filter", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return any(w.get("name") == worker for w in json.loads(response.read()))
    except (OSError, ValueError, urllib.error.URLError):
        return False


def start_server(port: int, timeout_s: float) -> str:
    """Start the server unless ours runs; returns its API URL once ``/api/health`` answers."""
    pid = read_pid("server")
    if pid is not None:
        api_url = (serve_dir() / "server.url").read_text().strip()
        print(f"server: already running (pid {pid}) at {api_url}", flush=True)
    else:
        api_url = f"http://127.0.0.1:{port}/api"
        if healthy(api_url):
            raise ServeError(f"port {port}: a Prefect server that `make serve` did not start answers there (no "
                             f"{serve_dir()}/server.pid). Stop it, or pick another port: make serve SERVE_PORT=4201")
        argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
        pid = _spawn("server", argv, dict(os.environ))
        (serve_dir() / "server.url").write_text(f"{api_url}\n")
        print(f"server: started (pid {pid}), waiting for {api_url}/health ...", flush=True)
    _wait("healthy", "server", pid, lambda: healthy(api_url), timeout_s)
    return api_url


def start_worker(api_url: str, pool: str, timeout_s: float) -> None:
    """Start a process worker for ``pool`` unless ours runs; returns once it is online."""
    name = f"{pool}-worker"
    pid = read_pid("worker")
    if pid is not None:
        print(f"worker: already running (pid {pid})", flush=True)
    else:
        argv = [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool, "--type", "process",
                "--name", name]
        pid = _spawn("worker", argv, {**os.environ, "PREFECT_API_URL": api_url})
        print(f"worker: started (pid {pid}) on pool {pool}, waiting for its first heartbeat ...", flush=True)
    _wait("online", "worker", pid, lambda: worker_online(api_url, pool, name), timeout_s)


def start(port: int = 4200, pool: str = POOL, timeout_s: float = 180.0) -> str:
    """Server, deployment, worker; prints how to run the deployment. Returns the API URL."""
    serve_dir().mkdir(parents=True, exist_ok=True)
    api_url = start_server(port, timeout_s)
    env = {**os.environ, "PREFECT_API_URL": api_url}
    subprocess.run([sys.executable, "-m", "flows.deploy", "--pool", pool], cwd=ROOT, env=env, check=True)
    start_worker(api_url, pool, timeout_s)
    d = serve_dir()
    print(f"""
Prefect UI: {api_url.removesuffix("/api")}   logs: {d}/server.log, {d}/worker.log
In your shell (the Prefect CLI and `make run` talk to this server only with it):
  export PREFECT_API_URL={api_url}
  {Path(sys.executable).with_name("prefect")} deployment run 'train-dgemm/{DEPLOYMENT}'
  {Path(sys.executable).with_name("prefect")} deployment run 'train-hargo/train-hargo'   (the HARGO comparison)
  {Path(sys.executable).with_name("prefect")} deployment run 'evaluate-dgemm/evaluate'   (CPU agents: docs/agents.md)
Stop both: make stop""")
    return api_url


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        for send in (os.killpg, os.kill):  # the group first (each was started as a session leader)
            try:
                send(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue


def terminate(pid: int, timeout_s: float = 30.0) -> list[int]:
    """SIGTERM (repeated every 3 s) to ``pid`` and its descendants, SIGKILL after ``timeout_s``; returns survivors."""
    family = [pid, *descendants(pid)]
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in family if alive(p)]) and time.monotonic() < deadline:
        _signal_all(left, signal.SIGTERM)
        end = min(deadline, time.monotonic() + 3.0)
        while any(alive(p) for p in left) and time.monotonic() < end:
            time.sleep(0.2)
    _signal_all([p for p in family if alive(p)], signal.SIGKILL)
    end = time.monotonic() + 10.0
    while any(alive(p) for p in family) and time.monotonic() < end:
        time.sleep(0.2)
    return [p for p in family if alive(p)]


def stop() -> bool:
    """Stop the worker, then the server; True when nothing of theirs is left running."""
    clean = True
    for name in NAMES:
        pid = read_pid(name)
        if pid is None:
            print(f"{name}: not running")
            continue
        left = terminate(pid)
        clean = clean and not left
        (serve_dir() / f"{name}.pid").unlink(missing_ok=True)
        print(f"{name}: stopped (pid {pid})" + (f"; still alive: {left}" if left else ""))
    return clean


def status() -> bool:
    """Print what runs; True when both run."""
    pids = {name: read_pid(name) for name in NAMES}
    url_file = serve_dir() / "server.url"
    url = url_file.read_text().strip() if url_file.exists() else "-"
    for name, pid in pids.items():
        print(f"{name}: " + (f"running (pid {pid})" if pid else "not running") + (f" at {url}" if name == "server"
                                                                                    and pid else ""))
    return all(pids.values())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("start", "stop", "status"))
    ap.add_argument("--port", type=int, default=4200, help="server port on 127.0.0.1 (start)")
    ap.add_argument("--pool", default=POOL, help="process work pool of the worker and the deployment (start)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for server and worker (start)")
    a = ap.parse_args(argv)
    if a.command == "start":
        try:
            start(a.port, a.pool, a.timeout)
        except (ServeError, subprocess.CalledProcessError) as exc:
            print(f"make serve failed: {exc}\nwhat did start keeps running; `make stop` stops it", file=sys.stderr)
            return 1
        return 0
    return 0 if (stop() if a.command == "stop" else status()) else 1


if __name__ == "__main__":
    sys.exit(main())
