"""The agents backend against the local executor on the same kernels in the same run: per-kernel overhead in a
batch (the batch's wall time on the agents minus on the local executor, per kernel, over repeated batches in
alternating order), batch throughput (kernels per second with every slot busy) and the latency of a lone kernel
(one at a time, paired by kernel, alternating which backend goes first), with the result cache off so every
kernel is compiled and timed.

It starts its own Prefect server and one agent per core (``flows/agents_stack.py``); the local executor uses the
same cores. Prints a table and writes it to docs/benchmarks.md (section "CPU agents").

Run: ``.venv/bin/python benchmarks/bench_agents.py [--kernels 12] [--batch 16] [--repeats 5] [--n 128]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from benchmarks.doc_sections import write_section  # noqa: E402
from flows.agents_stack import agents_stack  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"

# runs in a fresh process (Prefect reads PREFECT_API_URL at import): both backends over the same kernels
MEASURE = textwrap.dedent("""
    import json, sys, time
    from hpcrl_core.bench.cache import ResultCache
    from hpcrl_core.bench.engine import Engine
    from hpcrl_core.bench.executor import LocalExecutor
    from hpcrl_core.config import Settings, load_params
    from tasks.agents_backend import AgentsExecutor
    params = load_params(sys.argv[1])
    singles, batch, repeats = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    bench = params.bench.for_many(params.bench.n)
    # each v its own machine code (a return at a size never timed; a `+ 0.0 * v` folded to one, whose kernels then
    # shared one figure instead of being timed)
    kernel = ("void dgemm(int n, const double *A, const double *B, double *C) {{ if (n == 10000000 + {v}) return; "
              "for (int i = 0; i < n; i++) "
              "for (int k = 0; k < n; k++) {{ double a = A[i*n+k]; for (int j = 0; j < n; j++) "
              "C[i*n+j] = (k ? C[i*n+j] : 0.0) + a * B[k*n+j]; }} }}")
    settings = Settings()
    local = LocalExecutor(Engine(bench, settings))
    agents = AgentsExecutor(bench, settings, 1, poll_s=float(sys.argv[5]))
    rows, v = [], 0
    def one(ex, code):
        t0 = time.monotonic(); r = ex.submit(code).result(); return time.monotonic() - t0, r
    one(local, kernel.format(v=-1)); one(agents, kernel.format(v=-2))  # warm both paths
    for i in range(singles):
        pair = {}
        for name in (("local", "agents") if i % 2 == 0 else ("agents", "local")):
            v += 1
            ex = local if name == "local" else agents
            latency, r = one(ex, kernel.format(v=v))
            pair[name] = {"latency_s": latency, "engine_s": r.compile_s + r.run_s, "status": r.status.value}
        rows.append(pair)
    batches = []
    for rep in range(repeats):
        pair = {}
        for name in (("local", "agents") if rep % 2 == 0 else ("agents", "local")):
            ex = local if name == "local" else agents
            codes = [kernel.format(v=100_000 * (rep + 1) + 10_000 * (name == "agents") + k) for k in range(batch)]
            t0 = time.monotonic(); res = ex.map(codes); wall = time.monotonic() - t0
            pair[name] = {"kernels": batch, "wall_s": wall, "ok": sum(r.ok for r in res),
                          "disturbed": sum(r.disturbed for r in res)}
        batches.append(pair)
    local.close(); agents.close()
    print(json.dumps({"singles": rows, "batches": batches, "bundle": settings.agents_bundle}))
""")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", type=int, default=12, help="kernels timed one at a time on each backend")
    ap.add_argument("--batch", type=int, default=16, help="kernels of the throughput batch on each backend")
    ap.add_argument("--repeats", type=int, default=5, help="batches on each backend")
    ap.add_argument("--poll", type=float, default=0.05, help="how often the agents backend reads run states (s)")
    ap.add_argument("--n", type=int, default=128, help="matrix size")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/benchmarks.md as it is")
    args = ap.parse_args()
    cores = sorted(os.sched_getaffinity(0))
    home = Path(tempfile.mkdtemp(prefix="hpcrl-bench-agents-"))
    os.chmod(home, 0o755)
    params = home / "params.yaml"
    params.write_text(yaml.safe_dump({"bench": {"n": args.n, "cache": False}}))
    env = {**os.environ, "HPCRL_CACHE_DIR": str(home / "cache"), "HPCRL_SCRATCH_DIR": str(home / "scratch")}
    t0 = time.monotonic()
    with agents_stack(home / "prefect", params, agent_cores=[[c] for c in cores], env=env) as stack:
        up_s = time.monotonic() - t0
        print(f"server and {len(cores)} agent(s) up in {up_s:.0f} s; measuring ...", file=sys.stderr, flush=True)
        proc = subprocess.run([sys.executable, "-c", MEASURE, str(params), str(args.kernels), str(args.batch),
                               str(args.repeats), str(args.poll)],
                              cwd=ROOT, env={**stack.env, "HPCRL_AGENTS_WAIT_S": "120"}, capture_output=True,
                              text=True, timeout=3600)
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)
        return 1
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    section = render(data, args, cores, up_s)
    print(section)
    if not args.no_doc:
        write_section(DOC, "bench_agents", section, "## CPU agents", "# Benchmarks")
        print(f"\nwritten to {DOC.relative_to(ROOT)}", file=sys.stderr)
    return 0


def spread(values: list[float], scale: float = 1.0, fmt: str = ".3f") -> str:
    v = sorted(values)
    return f"{scale * statistics.median(v):{fmt}} [{scale * v[0]:{fmt}}, {scale * v[-1]:{fmt}}]"


def render(data: dict, args: argparse.Namespace, cores: list[int], up_s: float) -> str:
    singles, batches = data["singles"], data["batches"]
    lone = [p["agents"]["latency_s"] - p["local"]["latency_s"] for p in singles]
    per_kernel = [(b["agents"]["wall_s"] - b["local"]["wall_s"]) / b["agents"]["kernels"] for b in batches]
    rate = {name: [b[name]["kernels"] / b[name]["wall_s"] for b in batches] for name in ("local", "agents")}
    ok = {name: sum(b[name]["ok"] for b in batches) for name in ("local", "agents")}
    disturbed = {name: sum(b[name].get("disturbed", 0) for b in batches) for name in ("local", "agents")}
    total = sum(b["local"]["kernels"] for b in batches)
    lat = {name: [p[name]["latency_s"] for p in singles] for name in ("local", "agents")}
    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    lines = [
        f"Measured {datetime.now(UTC):%Y-%m-%d} at commit {commit} on {cpu}, {len(cores)} core(s), one agent per "
        f"core, the server and the client on the same cores, n = {args.n}, result cache off, short timing "
        f"(`bench.for_many`), up to {data['bundle']} kernels per task run (`HPCRL_AGENTS_BUNDLE`). Command: "
        f"`.venv/bin/python benchmarks/bench_agents.py --kernels {args.kernels} --batch {args.batch} "
        f"--repeats {args.repeats} --n {args.n} --poll {args.poll}`. Server and agents came up in {up_s:.0f} s. "
        "Figures are median [min, max].",
        "",
        "| figure | local executor | agents backend |",
        "|---|---|---|",
        f"| batch of {args.batch}, every slot busy, {len(batches)} batches each: kernels per second | "
        f"{spread(rate['local'], fmt='.2f')} ({ok['local']}/{total} ok) | "
        f"{spread(rate['agents'], fmt='.2f')} ({ok['agents']}/{total} ok) |",
        f"| kernels whose timing stayed disturbed by foreign load (of {total}) | {disturbed['local']} | "
        f"{disturbed['agents']} |",
        f"| overhead per kernel in a batch: (agents wall - local wall) / kernels (ms) | | "
        f"**{spread(per_kernel, 1000, '.0f')}** (target < 150) |",
        f"| a lone kernel, one at a time, {len(singles)} kernels each: latency (s) | {spread(lat['local'])} | "
        f"{spread(lat['agents'])} |",
        f"| a lone kernel: agents minus local, paired (ms) | | {spread(lone, 1000, '.0f')} |",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
