"""The agent's benchmarking without a server: its cores, and one request benchmarked by the agent's runtime with the
local engine (same result and cache key as a local run, the agent and node attached, the node's reference when
asked).

Run: pytest tests/bench/test_agent.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.bench import agent
from hpcrl_core.bench.agent import AgentRuntime, agent_cores
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.config import Settings
from hpcrl_core.errors import ConfigError
from tests.conftest import fast_params

NAIVE = ("void dgemm(int n, const double *A, const double *B, double *C) {\n"
         "  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) { double s = 0;\n"
         "    for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j]; C[i*n+j] = s; } }\n")


def test_agent_cores_take_the_first_listed_and_refuse_too_few() -> None:
    assert agent_cores(1, 1, [3, 1]) == [1]
    assert agent_cores(2, 1, [0, 1]) == [0, 1]
    with pytest.raises(ConfigError, match="needs 4 cores but 2 are available"):
        agent_cores(2, 2, [0, 1])
    with pytest.raises(ConfigError):
        agent_cores(0, 1, [0])


def test_a_request_gives_the_local_result_with_agent_and_node(bench_dirs: Settings, cores: tuple[int, ...]) -> None:
    bench = fast_params()
    runtime = AgentRuntime(list(cores), 1, bench_dirs)
    try:
        request = {"completion": NAIVE, "n": 64, "bench": bench.model_dump(mode="json"), "key": "k",
                   "reference": "naive", "reference_ttl_s": 60}
        got = agent.bench_request(runtime, request, "run-1")
        with LocalExecutor(runtime.executor(bench).engine, cores=cores) as local:
            expected = local.submit(NAIVE, 64).result()
        assert got["status"] == "ok" and got["key"] == expected.key  # the node's own cache key
        extra = got["extra"]
        assert extra["agent"] == runtime.agent_id and extra["node"] == local.engine.node.model
        assert extra["node_reference"] == "naive" and extra["node_reference_gflops"] > 0
        beat = runtime.heartbeat({"model": "x"})
        assert beat["kernels_done"] == 1 and beat["in_flight"] == [] and beat["slots"] == 1
        assert beat["references"] == {"naive@64": pytest.approx(extra["node_reference_gflops"], abs=1e-3)}
    finally:
        runtime.close()
