"""Where the agents are (tasks/agents_server.py): the server's URL and health, and the agents' heartbeats.

Run: pytest tests/tasks/test_agents_server.py
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from hpcrl_core.errors import BenchInfraError, ConfigError
from tasks.agents_server import api_url, check_server, read_agents
from tasks.bench_agent import HEARTBEAT_S, STALE_AFTER, VARIABLE_PREFIX


def test_the_url_comes_from_the_environment_without_a_trailing_slash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PREFECT_API_URL", "http://host:4200/api/")
    assert api_url() == "http://host:4200/api"
    monkeypatch.setenv("PREFECT_API_URL", "")
    with pytest.raises(ConfigError, match="set PREFECT_API_URL"):
        api_url()


@pytest.fixture
def health_server() -> Iterator[tuple[str, list[int]]]:
    """An HTTP server whose /health answers with the status at the head of the returned list."""
    status = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self.send_response(status[0] if self.path == "/api/health" else 404)
            self.end_headers()
            self.wfile.write(b"true")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api", status
    finally:
        server.shutdown()
        server.server_close()


def test_a_healthy_server_passes_and_an_unhealthy_one_is_named(health_server: tuple[str, list[int]]) -> None:
    url, status = health_server
    check_server(url)
    status[0] = 503
    with pytest.raises(BenchInfraError, match=f"{url} does not answer .*503"):
        check_server(url)
    with pytest.raises(BenchInfraError, match="does not answer .*404"):
        check_server(url + "/elsewhere")


def test_heartbeats_are_read_with_their_age_and_liveness() -> None:
    now = time.time()
    stale = now - STALE_AFTER * HEARTBEAT_S - 1
    variables = [
        SimpleNamespace(name=f"{VARIABLE_PREFIX}a", value=json.dumps({"agent": "a", "last_heartbeat": now - 1})),
        SimpleNamespace(name=f"{VARIABLE_PREFIX}b", value={"agent": "b", "last_heartbeat": stale}),
        SimpleNamespace(name=f"{VARIABLE_PREFIX}c", value="{not json"),  # skipped, not fatal
        SimpleNamespace(name="someone_else", value=json.dumps({"agent": "x", "last_heartbeat": now})),
    ]
    client = SimpleNamespace(read_variables=lambda limit: variables)
    got = {a["agent"]: a for a in read_agents(client)}
    assert sorted(got) == ["a", "b"]
    assert got["a"]["live"] and 1 <= got["a"]["age_s"] < 5
    assert not got["b"]["live"] and got["b"]["age_s"] > STALE_AFTER * HEARTBEAT_S
