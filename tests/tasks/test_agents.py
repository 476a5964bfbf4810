"""CPU agents end to end: a real Prefect server, two agents as separate processes (``hpcrl agent``), a client
process on the agents backend. One agent is killed with SIGKILL while it times a kernel; every kernel still gets
exactly one result. Without a matching agent the client stops with a clear error after its bounded wait, and says
so when live agents use another result store. A result store that fills up mid-batch: every kernel comes back,
with its result or with an error that names the store. Across hosts the store is S3 (``rclone serve s3`` here):
an agent with wrong credentials stops at start with the store named; with the right ones the kernels and results
travel through the bucket while the client and the agent have different local folders.

Run: pytest -m integration tests/tasks/test_agents.py  (about a minute; most of it is Prefect starting up)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from flows.agents_stack import Stack, agents_stack, local_s3, read_heartbeats
from hpcrl_core.runtime_env import ROOT
from tests.conftest import FAST_BENCH
from tests.helpers import public_tmp

pytestmark = pytest.mark.integration

# a client on the agents backend: N distinct correct kernels at n = 96 that each take a few seconds (the product is
# computed 300 + k times per call), so that a kill lands while one is timed; prints one JSON line of what came back.
# k is in the repeat count, so each kernel compiles to its own machine code: kernels with one machine code share
# one figure (docs/bench.md, "Cache") and would come back at once instead of being timed
CLIENT = textwrap.dedent("""
    import json, sys
    from hpcrl_core.config import load_params, Settings
    from tasks.agents_backend import AgentsExecutor
    params = load_params(sys.argv[1])
    count, cores_per_slot = int(sys.argv[2]), int(sys.argv[3])
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    kernel = ("void dgemm(int n, const double *A, const double *B, double *C) {{ "
              "for (int r = 0; r < 300 + {k}; r++) for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) {{ "
              "double s = 0.0; for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j]; C[i*n+j] = s; }} }}")
    with AgentsExecutor(params.bench, Settings(), cores_per_slot) as ex:
        results = ex.map([kernel.format(k=k) for k in range(count)])
        completed = ex.completed
        again = ex.submit(kernel.format(k=0)).result()  # known to this process: answered without a task run
        print(json.dumps({"results": [{"status": r.status.value, "key": r.key, "agent": r.extra.get("agent")}
                                      for r in results],
                          "completed": completed, "resubmitted": ex.resubmitted,
                          "again": {"cached": again.cached, "key": again.key, "runs_after": ex.completed,
                                    "first_disturbed": results[0].disturbed}}))
""")


# the same kernels (from the k given as a fourth argument: kernels no earlier test timed, so none is a cache hit that
# comes back at once), but every kernel's outcome is printed: its status, or the error its future raised
OUTCOMES = CLIENT.replace("""    results = ex.map([kernel.format(k=k) for k in range(count)])""", """
    futures = [ex.submit(kernel.format(k=first + k)) for k in range(count)]
    outcomes = []
    for f in futures:
        try:
            outcomes.append({"status": f.result(timeout=600).status.value})
        except Exception as err:
            outcomes.append({"error": f"{type(err).__name__}: {err}"})
    print(json.dumps({"outcomes": outcomes}))
    raise SystemExit(0)""")
assert OUTCOMES != CLIENT


def agents(url: str) -> list[dict[str, object]]:
    return read_heartbeats(url)


def completed_runs(url: str) -> int:
    return len(httpx.post(f"{url}/task_runs/filter", json={"task_runs": {"state": {"type": {"any_": ["COMPLETED"]}}}},
                          timeout=10).json())


def task_runs(url: str) -> int:
    return len(httpx.post(f"{url}/task_runs/filter", json={}, timeout=10).json())


def wait_for(check: object, timeout_s: float, what: str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = check()  # type: ignore[operator]
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"{what} not seen within {timeout_s:.0f} s")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A Prefect server with a private home, no agent yet; engine folders a sandbox user can reach."""
    home = tmp_path_factory.mktemp("prefect-home")
    dirs = public_tmp(home)
    params = home / "params.yaml"
    params.write_text(yaml.safe_dump({"bench": {**FAST_BENCH, "n": 96}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCRL_")}
    env.update(HPCRL_CACHE_DIR=str(dirs / "cache"), HPCRL_SCRATCH_DIR=str(dirs / "scratch"),
               HPCRL_LOCK_DIR=str(dirs / "locks"))
    with agents_stack(home, params, env=env) as running:
        yield running


def client(stack: Stack, count: int, cores_per_slot: int = 1, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CLIENT, str(stack.params), str(count), str(cores_per_slot)],
                            cwd=ROOT, env={**stack.env, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_no_matching_agent_is_an_error_after_the_wait(stack: Stack) -> None:
    t0 = time.monotonic()
    proc = client(stack, 1, cores_per_slot=2, HPCRL_AGENTS_WAIT_S="3")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "no CPU agent with 2-core slots has a live heartbeat" in err
    assert time.monotonic() - t0 < 60


def test_a_killed_agent_loses_no_kernel_and_none_comes_twice(stack: Stack) -> None:
    cores = sorted(os.sched_getaffinity(0))
    for core in (cores[0], cores[-1]):  # one core each (the same one on a 1-core machine: the locks share it)
        stack.start_agent([core])
    try:
        url = stack.url
        stack.wait_for_agents(2)
        count = 6  # two bundles of 3: the kill lands inside one
        proc = client(stack, count)
        busy = wait_for(lambda: [a for a in agents(url) if a["in_flight"]], 120, "an agent timing a kernel")
        victim = busy[0]  # type: ignore[index]
        os.killpg(int(victim["pid"]), signal.SIGKILL)  # the agent and what it started: a node that died
        taken = victim["in_flight"]
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        results = report["results"]
        assert len(results) == count and all(r["status"] == "ok" for r in results), results
        assert len({r["key"] for r in results}) == count  # each kernel once, none confused with another
        assert report["completed"] == count
        again = report["again"]
        assert again["key"] == results[0]["key"]
        if again["first_disturbed"]:  # the local cache's rule: a figure taken under foreign load is measured again
            assert not again["cached"] and again["runs_after"] == count + 1
        else:  # answered by the backend's memo, without a task run
            assert again["cached"] and again["runs_after"] == count
        states = {r["id"]: r["state"]["type"] for r in httpx.post(f"{url}/task_runs/filter", json={
            "task_runs": {"id": {"any_": taken}}}, timeout=10).json()}
        lost = [run for run in taken if states.get(run) != "COMPLETED"]
        print(f"killed {victim['agent']} holding {taken}: {states}; resubmitted {report['resubmitted']}; "
              f"timed by {sorted({r['agent'] for r in results})}")
        assert not lost or report["resubmitted"] >= len(lost)  # what the dead agent held was timed elsewhere
        assert all(states.get(run) in ("COMPLETED", "CRASHED") for run in taken), states  # none left RUNNING
    finally:
        stack.stop_agents()


def test_an_agent_whose_result_store_refuses_writes_stops_with_its_name(stack: Stack, tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"  # a folder under a file: refused even to root, who ignores permission bits
    blocked.write_text("")
    paths = [blocked / "store"]
    if os.geteuid() != 0:
        read_only = tmp_path / "read-only"
        read_only.mkdir(mode=0o500)
        paths.append(read_only / "store")
    for path in paths:
        env = {**stack.env, "PREFECT_LOCAL_STORAGE_PATH": str(path)}
        result = subprocess.run([sys.executable, "-m", "flows.cli", "agent", "--slots", "1", "--params",
                                 str(stack.params)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 1 and f"the result store {path} refuses writes" in result.stderr, result.stderr


def test_a_result_store_that_fills_mid_batch_names_itself_for_every_kernel_it_loses(stack: Stack,
                                                                                     tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs as the result store needs root")
    store = stack.home / "storage"  # the stack's own store, covered by a 4 MiB tmpfs for this test
    store.mkdir(exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(store)], check=True)
    try:
        stack.start_agent([sorted(os.sched_getaffinity(0))[0]])
        stack.wait_for_agents(1)
        # first, a client on another store: told which stores differ, not left waiting in silence (an agent
        # killed by an earlier test may still look live for a few seconds: the count is not pinned)
        elsewhere = tmp_path / "elsewhere"
        other = client(stack, 1, HPCRL_AGENTS_WAIT_S="3", PREFECT_LOCAL_STORAGE_PATH=str(elsewhere))
        _, err = other.communicate(timeout=120)
        assert other.returncode != 0 and "live agent(s) use another result store" in err, err[-2000:]
        assert f"({store}) than this process ({elsewhere})" in err
        count = 4  # bundles of 2: the first comes back, the second meets the full store
        before, runs_before = completed_runs(stack.url), task_runs(stack.url)
        proc = subprocess.Popen([sys.executable, "-c", OUTCOMES, str(stack.params), str(count), "1", "1000"], cwd=ROOT,
                                env={**stack.env, "HPCRL_AGENTS_BUNDLE": "2"}, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        # the client sends the second bundle's request as soon as it sees the first complete: it is held (SIGSTOP)
        # from the moment its first run exists, so the store fills before that request however fast the agent is
        wait_for(lambda: proc.poll() is not None or task_runs(stack.url) > runs_before, 120,
                 "the client's first bundle")
        held = proc.poll() is None
        if held:
            os.kill(proc.pid, signal.SIGSTOP)
        try:
            # once a run is COMPLETED its results are stored: the client can still read them from a full store
            wait_for(lambda: completed_runs(stack.url) > before, 120, "the first bundle completed")
            subprocess.run(["dd", "if=/dev/zero", f"of={store / 'filler'}", "bs=64k"], capture_output=True)
            assert os.statvfs(store).f_bavail == 0  # ENOSPC for the next write
        finally:
            if held:
                os.kill(proc.pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        outcomes = json.loads(out.strip().splitlines()[-1])["outcomes"]
        print(outcomes)
        assert len(outcomes) == count  # every kernel answered: nothing dropped, nothing hanging
        errors = [o["error"] for o in outcomes if "error" in o]
        assert errors, outcomes  # the kernels after the fill cannot have come back
        oks = [o for o in outcomes if "error" not in o]
        assert oks and all(o["status"] == "ok" for o in oks), outcomes  # those before it did
        for error in errors:
            assert error.startswith("BenchInfraError") and f"result store {store}" in error, error
        assert any("No space left on device" in e for e in errors)
    finally:
        stack.stop_agents()
        subprocess.run(["umount", str(store)], check=False)



STORE_BLOCK = "remote-file-system/hpcrl-results"


def test_results_through_s3_between_processes_that_share_no_folder(stack: Stack, tmp_path: Path) -> None:
    with local_s3(tmp_path / "s3") as aws:
        base = {**stack.env, **aws}
        subprocess.run([sys.executable, "-c", "from prefect.filesystems import RemoteFileSystem; "
                        "RemoteFileSystem(basepath='s3://hpcrl/prefect').save('hpcrl-results', overwrite=True)"],
                       cwd=ROOT, env=base, check=True, capture_output=True, timeout=120)
        s3_env = {**aws, "PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK": STORE_BLOCK,
                  "PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK": STORE_BLOCK}
        wrong = subprocess.run([sys.executable, "-m", "flows.cli", "agent", "--slots", "1", "--params",
                                str(stack.params)], cwd=ROOT, env={**base, **s3_env,
                                                                   "AWS_SECRET_ACCESS_KEY": "not-the-secret"},
                               capture_output=True, text=True, timeout=120)
        assert wrong.returncode == 1 and "the result store s3://hpcrl/prefect refuses writes" in wrong.stderr, \
            wrong.stderr[-2000:]
        stack.start_agent([sorted(os.sched_getaffinity(0))[0]],
                          env={**s3_env, "PREFECT_LOCAL_STORAGE_PATH": str(tmp_path / "agent-local")})
        try:
            beat = stack.wait_for_agents(1)[0]
            assert beat["result_store"] == "s3://hpcrl/prefect"
            proc = client(stack, 2, **s3_env, PREFECT_LOCAL_STORAGE_PATH=str(tmp_path / "client-local"))
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            results = json.loads(out.strip().splitlines()[-1])["results"]
            assert [r["status"] for r in results] == ["ok"] * 2
        finally:
            stack.stop_agents()
        stored = [p for p in (tmp_path / "s3" / "hpcrl" / "prefect").rglob("*") if p.is_file()]
        assert any("parameters" in p.parts for p in stored) and len(stored) >= 2  # requests and results
        for local in ("agent-local", "client-local"):  # nothing went through a local folder
            assert not [p for p in (tmp_path / local).rglob("*") if p.is_file()]
