"""The installed ``hpcrl`` (flows/cli.py): the core commands unchanged, and the agent commands' errors before any
server work: no PREFECT_API_URL, a server that does not answer. Each is a message and exit 1.

Run: pytest tests/flows/test_cli.py
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from flows.agents_stack import free_port
from hpcrl_core.runtime_env import ROOT


def hpcrl(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=ROOT, env={**base, **env}, text=True,
                          capture_output=True, timeout=120)


def dead_url() -> str:
    return f"http://127.0.0.1:{free_port()}/api"


def test_core_commands_are_there() -> None:
    out = hpcrl("--help").stdout
    for command in ("config", "bench", "agent", "status"):
        assert command in out
    assert "--backend" in hpcrl("bench", "--help").stdout


@pytest.mark.parametrize("command", [["agent", "--slots", "1"], ["status"]])
def test_without_a_server_setting_the_agent_commands_say_what_to_set(command: list[str]) -> None:
    result = hpcrl(*command)
    assert result.returncode == 1 and "set PREFECT_API_URL" in result.stderr


@pytest.mark.parametrize("command", [["agent", "--slots", "1"], ["status"],
                                     ["bench", "--backend", "agents", "--ladder"]])
def test_an_unreachable_server_is_named(command: list[str]) -> None:
    url = dead_url()
    result = hpcrl(*command, PREFECT_API_URL=url)
    assert result.returncode == 1 and f"the Prefect server at {url} does not answer" in result.stderr


def test_reference_is_refused_on_agents() -> None:
    result = hpcrl("bench", "--backend", "agents", "--reference", PREFECT_API_URL=dead_url())
    assert result.returncode == 1 and "each agent measures its own node" in result.stderr
