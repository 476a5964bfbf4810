"""Where the CPU agents are: the Prefect server they and the ``agents`` backend (``tasks/agents_backend.py``) talk
to, whether it answers, and the agents' heartbeats on it (``tasks/bench_agent.py`` writes them).

Test: ``pytest tests/tasks/test_agents_server.py``; with a server and two agents:
``pytest -m integration tests/tasks/test_agents.py``.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from typing import Any

from hpcrl_core.errors import BenchInfraError, ConfigError
from tasks.bench_agent import HEARTBEAT_S, STALE_AFTER, VARIABLE_PREFIX


def api_url() -> str:
    """The Prefect server's API URL from ``PREFECT_API_URL``.

    Raises:
        ConfigError: it is not set.
    """
    url = os.environ.get("PREFECT_API_URL", "").rstrip("/")
    if not url:
        raise ConfigError("the agents backend needs a Prefect server: set PREFECT_API_URL (`make serve` writes it to "
                          "serve.env: `set -a; . ./serve.env; set +a`)")
    return url


def check_server(url: str, timeout_s: float = 5.0) -> None:
    """Raises ``BenchInfraError`` naming ``url`` when the server does not answer its health check."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as response:
            if response.status == 200:
                return
            reason = f"HTTP {response.status}"
    except urllib.error.HTTPError as err:
        reason = f"HTTP {err.code} {err.reason}"
    except (urllib.error.URLError, OSError, TimeoutError) as err:
        reason = str(getattr(err, "reason", err))
    raise BenchInfraError(f"the Prefect server at {url} does not answer ({reason}); start it (`make serve`) or "
                          "fix PREFECT_API_URL")


def read_agents(client: Any) -> list[dict[str, Any]]:
    """Every agent heartbeat the server holds, live or not, each with ``age_s`` and ``live`` added."""
    now = time.time()
    out = []
    for var in client.read_variables(limit=None):
        if not var.name.startswith(VARIABLE_PREFIX):
            continue
        try:
            record = json.loads(var.value) if isinstance(var.value, str) else dict(var.value)
        except (TypeError, ValueError):
            continue
        age = now - float(record.get("last_heartbeat", 0))
        out.append({**record, "age_s": age, "live": age < STALE_AFTER * HEARTBEAT_S})
    return out
