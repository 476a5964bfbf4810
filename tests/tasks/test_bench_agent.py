"""The agent's Prefect side without a server: heartbeat names and the task refusing to run outside an agent
(the benchmarking itself: tests/bench/test_agent.py).

Run: pytest tests/tasks/test_bench_agent.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.errors import BenchInfraError
from tasks.bench_agent import agent_task, bench_request, heartbeat_name
from tests.conftest import fast_params

NAIVE = ("void dgemm(int n, const double *A, const double *B, double *C) {\n"
         "  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) { double s = 0;\n"
         "    for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j]; C[i*n+j] = s; } }\n")


def test_heartbeat_names_are_valid_variable_names() -> None:
    name = heartbeat_name("Node-A.example_123_ab")
    assert name.startswith("hpcrl_agent_") and all(c.isalnum() or c == "_" for c in name) and name == name.lower()


def test_the_task_refuses_to_run_outside_an_agent() -> None:
    with pytest.raises(BenchInfraError, match="outside an agent"):
        bench_request.fn({"completion": NAIVE, "n": 64, "bench": fast_params().model_dump(mode="json")})


def test_each_agent_serves_the_task_under_a_key_of_its_own() -> None:
    a, b = agent_task("node-a_1_x"), agent_task("node-b_2_y")
    assert a.task_key != b.task_key and bench_request.task_key not in (a.task_key, b.task_key)
    assert agent_task("node-a_1_x").task_key == a.task_key  # the client derives the agent's key
    # a task worker serves copies it rebuilds with with_options: they must keep the key the runs are sent under
    assert a.with_options(persist_result=True).task_key == a.task_key
    assert a.name == "bench_request@node-a_1_x"
    with pytest.raises(BenchInfraError, match="outside an agent"):
        a.fn({"kernels": [{"completion": NAIVE, "n": 64}], "bench": fast_params().model_dump(mode="json")})
