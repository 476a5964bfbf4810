"""The agent's benchmarking without a server: its cores, and one request benchmarked by the agent's runtime with the
local engine (a bundle's results in order, each with the cache key of a local run, the agent and node attached,
the node's reference when asked; a request that is not a bundle refused).

Run: pytest tests/bench/test_agent.py
"""

from __future__ import annotations

import pytest

from hpcrl_core.bench import agent
from hpcrl_core.bench.agent import AgentRuntime, agent_cores
from hpcrl_core.bench.executor import LocalExecutor
from hpcrl_core.config import Settings
from hpcrl_core.errors import BenchInfraError, ConfigError
from tests.conftest import fast_params

NAIVE = ("void dgemm(int n, const double *A, const double *B, double *C) {\n"
         "  for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) { double s = 0;\n"
         "    for (int k = 0; k < n; k++) s += A[i*n+k] * B[k*n+j]; C[i*n+j] = s; } }\n")
BROKEN = "void dgemm(int n, const double *A, const double *B, double *C) { C[0] = ; }\n"


def test_agent_cores_take_the_first_listed_and_refuse_too_few() -> None:
    assert agent_cores(1, 1, [3, 1]) == [1]
    assert agent_cores(2, 1, [0, 1]) == [0, 1]
    with pytest.raises(ConfigError, match="needs 4 cores but 2 are available"):
        agent_cores(2, 2, [0, 1])
    with pytest.raises(ConfigError):
        agent_cores(0, 1, [0])


def test_a_bundle_gives_the_local_results_in_order_with_agent_and_node(bench_dirs: Settings,
                                                                      cores: tuple[int, ...]) -> None:
    bench = fast_params()
    runtime = AgentRuntime(list(cores), 1, bench_dirs)
    try:
        request = {"kernels": [{"completion": NAIVE, "n": 64, "key": "k1"}, {"completion": BROKEN, "n": 64,
                                                                             "key": "k2"},
                               {"completion": NAIVE, "n": 48, "key": "k3"}],
                   "bench": bench.model_dump(mode="json"), "reference": "naive", "reference_ttl_s": 60}
        got = agent.bench_request(runtime, request, "run-1")["results"]
        with LocalExecutor(runtime.executor(bench).engine, cores=cores) as local:
            expected = [local.submit(NAIVE, 64).result(), local.submit(BROKEN, 64).result(),
                        local.submit(NAIVE, 48).result()]
        assert [g["status"] for g in got] == [e.status.value for e in expected] == ["ok", "compile_error", "ok"]
        assert [g["key"] for g in got] == [e.key for e in expected]  # the node's own cache keys, in order
        assert [g["n"] for g in got] == [64, 64, 48]
        extra = got[0]["extra"]
        assert extra["agent"] == runtime.agent_id and extra["node"] == local.engine.node.model
        assert extra["node_reference"] == "naive" and extra["node_reference_gflops"] > 0
        assert "node_reference_gflops" not in got[1]["extra"]  # asked only for a verified kernel
        beat = runtime.heartbeat({"model": "x"})
        assert beat["kernels_done"] == 3 and beat["in_flight"] == [] and beat["slots"] == 1
        assert set(beat["references"]) == {"naive@64", "naive@48"}
        assert beat["references"]["naive@64"] == pytest.approx(extra["node_reference_gflops"], abs=1e-3)
    finally:
        runtime.close()


@pytest.mark.parametrize("request_", [{"completion": NAIVE, "n": 64}, {"kernels": []},
                                      {"kernels": [{"code": NAIVE}]}])
def test_a_request_that_is_not_a_bundle_is_an_infrastructure_error(bench_dirs: Settings, cores: tuple[int, ...],
                                                                   request_: dict) -> None:
    runtime = AgentRuntime(list(cores), 1, bench_dirs)
    try:
        with pytest.raises(BenchInfraError, match="different hpcrl versions"):
            agent.bench_request(runtime, {**request_, "bench": fast_params().model_dump(mode="json")}, "run-1")
        assert runtime.heartbeat({})["in_flight"] == []
    finally:
        runtime.close()
