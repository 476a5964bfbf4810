"""How long ``make serve`` takes to bring the stack up (cold: a fresh state folder; warm: everything already running,
only the deployments refreshed) and ``make stop`` to take it down, over repeated runs on free ports with a private
PREFECT_HOME. Prints min / median / max per phase as ``flows/serve.py`` reports them (``s3``, ``mlflow, server``,
``cpu-worker, gpu-worker, agent``) and the totals, with the CPU model (figures differ between machines).

Run: ``.venv/bin/python benchmarks/bench_serve.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flows.service import free_port  # noqa: E402

PHASE = re.compile(r"^(.+): up \((\d+) s\)$", re.M)


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[2:])} failed:\n{done.stdout}\n{done.stderr}")
    return time.monotonic() - t0, done.stdout


def one_run(root: Path) -> dict[str, float]:
    home = root / "home"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_API_URL", "MLFLOW_TRACKING", "AWS_", "HPCRL_S3"))}
    env["PREFECT_HOME"] = str(home)
    serve = [sys.executable, "-m", "flows.serve"]
    start = [*serve, "start", "--port", str(free_port()), "--mlflow-port", str(free_port()), "--s3-port",
             str(free_port()), "--env-file", str(root / "serve.env")]
    figures: dict[str, float] = {}
    try:
        figures["cold start"], out = timed(start, env)
        figures.update({f"  {name}": float(s) for name, s in PHASE.findall(out)})
        figures["warm start"], _ = timed(start, env)
    finally:
        figures["stop"], _ = timed([*serve, "stop"], env)
    return figures


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args(argv)
    runs = []
    for i in range(a.runs):
        with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
            runs.append(one_run(Path(tmp)))
        print(f"run {i + 1}/{a.runs}: " + ", ".join(f"{k.strip()} {v:.0f} s" for k, v in runs[-1].items()),
              flush=True)
    print(f"\nmake serve on {cpu_model()} ({os.cpu_count()} CPUs), {a.runs} runs: seconds min / median / max")
    for key in runs[0]:
        values = [r[key] for r in runs if key in r]
        print(f"{key:<34} {min(values):6.1f} {statistics.median(values):6.1f} {max(values):6.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
