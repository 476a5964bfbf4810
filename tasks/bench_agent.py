"""The benchmark task CPU agents serve, and the agent process that serves it (``hpcrl agent``).

An agent is a Prefect task worker (``prefect.task_worker.serve``) of one task, ``bench_request``: it takes a request
(a completion, the size, the engine params the client uses), benchmarks it with the local engine on one of the
agent's exclusive core slots (``hpcrl_core/bench/agent.py``: one kernel per slot at a time, slots reserved
machine-wide) and returns the ``BenchResult`` as a dict, with the agent, its node and, when asked, the node's
reference figure. The agent's own result cache answers a kernel it timed before, with the same cache key as a local
run on that node.

Each agent serves the task under its own task key (``agent_task``): the backend picks the agent for every run it
submits, so a run never waits at a busy agent while another is idle (Prefect's server hands a queued run to
whichever subscriber asks first, and a busy task worker still takes one or two more than it can start).

Every ``HEARTBEAT_S`` the agent writes a Prefect variable ``hpcrl_agent_<id>`` with its node fingerprint, slots,
reference GFLOPS (numpy on its own slot at ``bench.n``), the task runs it holds and the kernels it finished. The
backend (``tasks/agents_backend.py``) reads them to see which agents live and which runs a dead agent took with it;
``hpcrl status`` prints them.

Run: ``hpcrl agent --slots 1 [--cores 0]`` (with ``PREFECT_API_URL`` set).
Test: ``pytest tests/tasks/test_bench_agent.py``; the whole path: ``pytest -m integration tests/tasks/test_agents.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.bench import agent
from hpcrl_core.bench.agent import AgentRuntime, agent_cores, node_record
from hpcrl_core.config import BenchParams, Settings
from hpcrl_core.errors import BenchInfraError

HEARTBEAT_S = 2.0  # an agent silent for STALE_AFTER heartbeats is taken for dead
STALE_AFTER = 4
VARIABLE_PREFIX = "hpcrl_agent_"
TASK_NAME = "bench_request"  # what the Prefect UI lists an agent's runs under


_AGENT: AgentRuntime | None = None


def install_agent(runtime: AgentRuntime | None) -> None:
    """Make ``runtime`` the one the task uses in this process (None removes it)."""
    global _AGENT
    _AGENT = runtime


def _runtime() -> tuple[AgentRuntime, str]:
    """The agent of this process and the id of the task run being served."""
    from prefect.runtime import task_run

    if _AGENT is None:
        raise BenchInfraError("bench_request ran outside an agent: it is served by `hpcrl agent`, never run inline")
    return _AGENT, str(task_run.id)


@task(cache_policy=NO_CACHE, retries=0)
def bench_request(request: dict[str, Any]) -> dict[str, Any]:
    """Benchmark one request's kernels on this agent (see the module docstring). A kernel's failure is a result;
    only a fault of the machinery raises (``BenchInfraError``), and the backend resubmits such a request elsewhere.
    Agents serve it under their own task keys (``agent_task``).

    Args:
        request: ``kernels`` (each ``completion``, ``n``, ``key``), ``bench`` (a ``BenchParams`` dict), ``nonce``
            (one per attempt), optionally ``reference`` (kind) and ``reference_ttl_s``.
    """
    runtime, run_id = _runtime()
    return agent.bench_request(runtime, request, run_id)


def heartbeat_name(agent_id: str) -> str:
    return VARIABLE_PREFIX + "".join(ch if ch.isalnum() else "_" for ch in agent_id.lower())


def agent_task(agent_id: str) -> Any:
    """``bench_request`` as the agent ``agent_id`` serves it: named after the agent in the UI, with a task key of
    its own, so that a run submitted with it reaches that agent and no other. Prefect derives a task key from the
    function's name and code (and rebuilds tasks from their function), so the agent's copy is a function of its
    own name; the client and the agent derive the same key from the agent id."""

    def bench_on_agent(request: dict[str, Any]) -> dict[str, Any]:
        runtime, run_id = _runtime()
        return agent.bench_request(runtime, request, run_id)

    bench_on_agent.__name__ = bench_on_agent.__qualname__ = f"{TASK_NAME}_{heartbeat_name(agent_id)}"
    bench_on_agent.__doc__ = bench_request.fn.__doc__
    return task(name=f"{TASK_NAME}@{agent_id}", cache_policy=NO_CACHE, retries=0)(bench_on_agent)


def publish(name: str, record: dict[str, Any]) -> None:
    """Write the heartbeat variable (JSON text: Prefect variables hold JSON values)."""
    from prefect.variables import Variable

    Variable.set(name, json.dumps(record), overwrite=True)


def unpublish(name: str) -> None:
    from prefect.variables import Variable

    Variable.unset(name)


def result_storage() -> tuple[Any, str]:
    """Where Prefect keeps task parameters and results in this process (its default task-scheduling storage block,
    or ``PREFECT_LOCAL_STORAGE_PATH``), and a description of it (the folder or bucket path): the client and its
    agents must name the same one."""
    from prefect.results import get_or_create_default_task_scheduling_storage
    from prefect.utilities.asyncutils import run_coro_as_sync

    store: Any = run_coro_as_sync(get_or_create_default_task_scheduling_storage())
    where = getattr(store, "basepath", None) or type(store).__name__
    return store, str(where)


def check_result_storage() -> str:
    """Write, read and delete a probe in the result store (``result_storage``); returns its description.

    Raises:
        BenchInfraError: the store refuses (wrong credentials, full disk, read-only path), naming it.
    """
    from prefect.utilities.asyncutils import run_coro_as_sync

    store, where = result_storage()
    probe = f"hpcrl-probe-{uuid.uuid4().hex}"
    try:
        run_coro_as_sync(_maybe_await(store.write_path(probe, b"ok")))
        if run_coro_as_sync(_maybe_await(store.read_path(probe))) != b"ok":
            raise OSError("read back something else than was written")
    except Exception as err:
        raise BenchInfraError(f"the result store {where} refuses writes ({err}); agents and the backend exchange "
                              "every kernel and result through it: fix its path or credentials "
                              "(PREFECT_LOCAL_STORAGE_PATH, PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK)") from err
    finally:
        with contextlib.suppress(Exception):  # a probe left behind is harmless
            resolved = store._resolve_path(probe)
            fs = getattr(store, "filesystem", None)  # a remote store (s3://...) deletes through fsspec
            if fs is not None:
                fs.rm(resolved)
            else:
                os.remove(resolved)
    return where


async def _maybe_await(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


def serve_agent(bench: BenchParams, settings: Settings, slots: int, cores: Sequence[int] | None = None,
                log: Any = print) -> None:
    """Run a CPU agent until interrupted: check the server and the result store, measure the node, publish
    heartbeats and serve ``bench_request`` with ``slots`` runs at a time.

    Raises:
        ConfigError: no PREFECT_API_URL, or too few cores. BenchInfraError: server or result store unusable.
    """
    from prefect.task_worker import serve

    from tasks.agents_server import api_url, check_server

    url = api_url()
    check_server(url)
    storage = check_result_storage()
    cps = bench.executor.cores_per_slot
    runtime = AgentRuntime(agent_cores(slots, cps, cores), cps, settings, result_store=storage)
    install_agent(runtime)
    name = heartbeat_name(runtime.agent_id)
    stop = threading.Event()
    try:
        log(f"agent {runtime.agent_id}: measuring the node (numpy at n={bench.n} on slot {runtime.slots[0]}) ...")
        node = node_record(bench, runtime)
        publish(name, runtime.heartbeat(node))
        log(f"agent {runtime.agent_id}: {node['model']}, slots {runtime.slots}, numpy {node['numpy_gflops']} "
            f"GFLOPS, server {url}, result store {storage}; serving {TASK_NAME}")

        def beat() -> None:
            while not stop.wait(HEARTBEAT_S):
                try:
                    publish(name, runtime.heartbeat(node))
                except Exception as err:  # a missed beat is retried; the backend tolerates STALE_AFTER of them
                    log(f"agent {runtime.agent_id}: heartbeat failed: {err}")

        threading.Thread(target=beat, daemon=True, name="agent-heartbeat").start()
        serve(agent_task(runtime.agent_id), limit=len(runtime.slots))
    finally:
        stop.set()
        with contextlib.suppress(Exception):  # the server is gone: the record simply goes stale
            unpublish(name)
        install_agent(None)
        runtime.close()
