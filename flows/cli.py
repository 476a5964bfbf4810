"""The installed ``hpcrl`` command: the core commands of ``hpcrl_core/cli.py`` plus those that need Prefect.

    hpcrl agent --slots N [--cores 0,1] [--params P]   serve benchmarks as a CPU agent (PREFECT_API_URL)
    hpcrl status [--json]                              make serve's services and their health, the agents the
                                                       server knows: node, slots, heartbeat, kernels
    hpcrl bench FILE... --backend agents               kernels timed by the agents (the agents backend)

Prefect is imported only by these commands: ``hpcrl bench`` on this machine starts as fast as before.

Test: ``pytest tests/flows/test_cli.py``; with a server: ``pytest -m integration tests/tasks/test_agents.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from hpcrl_core import cli
from hpcrl_core.config import Settings


def _cores(text: str) -> list[int]:
    try:
        return sorted({int(c) for c in text.split(",") if c.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--cores takes CPU numbers separated by commas, got {text!r}") from None


def _cmd_agent(args: argparse.Namespace) -> int:
    from tasks.bench_agent import serve_agent

    params = cli._load(args)
    bench = params.bench
    if args.cores_per_slot:
        bench = bench.model_copy(update={"executor": bench.executor.model_copy(
            update={"cores_per_slot": args.cores_per_slot})})
    serve_agent(bench, Settings(), args.slots, args.cores, log=lambda m: print(m, flush=True))
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.serve import format_services, serve_dir, server_url, service_health
    from tasks.agents_server import api_url, check_server, read_agents

    services = service_health() if serve_dir().is_dir() else []
    running = [s for s in services if s["pid"] is not None]
    # a stack that runs, in part or whole, must answer everywhere; one that is stopped is no failure
    stack_ok = not running or all(s["healthy"] for s in services)
    url = os.environ.get("PREFECT_API_URL", "").rstrip("/") or server_url() or api_url()  # api_url names the gap
    if running and not args.json:
        print(f"make serve ({serve_dir()}):\n{format_services(services)}\n")
    check_server(url)
    with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        agents = read_agents(client)
    if args.json:
        print(json.dumps({"server": url, "agents": agents, "services": services}, sort_keys=True, indent=2))
        return 0 if stack_ok else 1
    print(f"server {url}: {sum(a['live'] for a in agents)} live agent(s), "
          f"{sum(int(a.get('slots', 0)) for a in agents if a['live'])} slot(s)")
    head = f"{'agent':<34} {'state':<6} {'slots':>5} {'numpy GF':>9} {'beat':>6} {'done':>6} {'busy':>4}  node"
    print(head + "\n" + "-" * len(head))
    for a in sorted(agents, key=lambda a: str(a.get("agent"))):
        node = a.get("node") or {}
        print(f"{str(a.get('agent'))[:34]:<34} {'live' if a['live'] else 'stale':<6} {a.get('slots', 0):>5} "
              f"{node.get('numpy_gflops', 0):>9.2f} {a['age_s']:>5.0f}s {a.get('kernels_done', 0):>6} "
              f"{len(a.get('in_flight', [])):>4}  {node.get('model', '?')} (started {a.get('started_at', '?')})")
    return 0 if stack_ok else 1


def build_parser() -> argparse.ArgumentParser:
    ap = cli.build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    agent = sub.add_parser("agent", help="serve kernel benchmarks as a CPU agent of a Prefect server",
                           description="A Prefect task worker of the benchmark task: each slot times one kernel at "
                           "a time on its own cores. Needs PREFECT_API_URL; see docs/agents.md.")
    agent.add_argument("--slots", type=int, default=1, help="kernels timed at once (default 1)")
    agent.add_argument("--cores", type=_cores, help="CPU numbers to use, e.g. 2,3 (default: this process's CPU set)")
    agent.add_argument("--cores-per-slot", type=int, help="cores per timed run (default: bench.executor)")
    agent.add_argument("--params", default=str(cli.DEFAULT_PARAMS), help="params file (default: params.yaml)")
    agent.set_defaults(func=_cmd_agent)
    status = sub.add_parser("status", help="make serve's services and the CPU agents the Prefect server knows",
                            description="The health of each service `make serve` started (exit 1 when one does not "
                            "answer), then the agents of the server (PREFECT_API_URL, else make serve's).")
    status.add_argument("--json", action="store_true", help="services and heartbeat records as JSON")
    status.set_defaults(func=_cmd_status)
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    wants_agents = "agents" in argv or "--backend=agents" in argv or os.environ.get("HPCRL_BENCH_BACKEND") == "agents"
    if wants_agents:
        import tasks.agents_backend  # noqa: F401  registers the agents backend
    return cli.main(argv, build_parser())


if __name__ == "__main__":
    sys.exit(main())
