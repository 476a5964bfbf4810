"""The agents backend without a server: request keys, deadlines, the backend registry and the errors a user meets
before any kernel runs (no server configured, a server that does not answer).

Run: pytest tests/tasks/test_agents_backend.py
"""

from __future__ import annotations

import time

import pytest

from flows.agents_stack import free_port
from hpcrl_core.bench.executor import BACKENDS, LocalExecutor, bench_backend
from hpcrl_core.config import Settings
from hpcrl_core.errors import BenchInfraError, ConfigError
from tasks.agents_backend import AgentsExecutor, bundle_size, kernel_budget_s, request_key
from tests.conftest import fast_params

SIG = "void dgemm(int n, const double *A, const double *B, double *C)"
KERNEL = SIG + " { for (int i = 0; i < n * n; i++) C[i] = 0; }"


def test_request_keys_ignore_layout_and_see_everything_that_changes_a_figure() -> None:
    bench = fast_params()
    key = request_key(KERNEL, 64, 1, bench)
    assert request_key(KERNEL.replace(" {", "\n{  /* same */"), 64, 1, bench) == key
    assert request_key(KERNEL, 128, 1, bench) != key
    assert request_key(KERNEL, 64, 2, bench) != key
    assert request_key(KERNEL, 64, 1, fast_params(cflags=["-O2"])) != key
    assert request_key(KERNEL.replace("= 0", "= 1"), 64, 1, bench) != key


def test_the_deadline_covers_every_timed_attempt() -> None:
    one = kernel_budget_s(fast_params())
    more = kernel_budget_s(fast_params(timing={**fast_params().timing.model_dump(), "disturbed_retries": 2}))
    assert more - one == pytest.approx(2 * fast_params().run_timeout_s)
    assert one > fast_params().compile_timeout_s + fast_params().run_timeout_s
    twice = kernel_budget_s(fast_params(timing={**fast_params().timing.model_dump(), "fresh_runs": 2}))
    assert twice - one == pytest.approx(fast_params().run_timeout_s)  # one build, timed twice


def test_bundles_split_the_queue_over_the_free_slots_up_to_the_cap() -> None:
    assert bundle_size(1, 4, 8) == 1  # a lone kernel goes alone, at once
    assert bundle_size(16, 2, 8) == 8
    assert bundle_size(10, 2, 8) == 5  # even halves, not 8 + 2
    assert bundle_size(64, 2, 8) == 8  # the cap: later kernels wait for the next free slot
    assert bundle_size(3, 0, 8) == 3
    assert bundle_size(5, 2, 1) == 1  # HPCRL_AGENTS_BUNDLE=1: one kernel per task run


def test_no_server_configured_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    with pytest.raises(ConfigError, match="PREFECT_API_URL"):
        AgentsExecutor(fast_params(), Settings())


def test_a_server_that_does_not_answer_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # nobody listens there
    monkeypatch.setenv("PREFECT_API_URL", f"http://127.0.0.1:{port}/api")
    t0 = time.monotonic()
    with pytest.raises(BenchInfraError, match=f"127.0.0.1:{port}.*does not answer"):
        AgentsExecutor(fast_params(), Settings())
    assert time.monotonic() - t0 < 10


def test_the_backend_setting_chooses_the_registered_factory(monkeypatch: pytest.MonkeyPatch,
                                                            bench_dirs: Settings) -> None:
    assert "agents" in BACKENDS  # importing tasks.agents_backend registers it
    with bench_backend(fast_params(), bench_dirs) as ex:
        assert isinstance(ex, LocalExecutor)
    monkeypatch.delitem(BACKENDS, "agents")
    with pytest.raises(ConfigError, match="HPCRL_BENCH_BACKEND='agents' is not available here"):
        bench_backend(fast_params(), bench_dirs.model_copy(update={"bench_backend": "agents"}))


def test_the_backend_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HPCRL_BENCH_BACKEND", "agents")
    monkeypatch.setenv("HPCRL_AGENTS_WAIT_S", "5")
    assert (Settings().bench_backend, Settings().agents_wait_s) == ("agents", 5.0)
    monkeypatch.setenv("HPCRL_BENCH_BACKEND", "gpu")
    with pytest.raises(ValueError, match="local.*agents"):
        Settings()
