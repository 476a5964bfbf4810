"""The held-out DGEMM evaluation (``flows/evaluate.py``, what ``dvc repro evaluate_dgemm`` runs) end to end on CPU
agents, beside the same evaluation's local report: a Prefect server and one agent per core (``flows/agents_stack``),
the evaluation with ``HPCRL_BENCH_BACKEND=agents`` and a fresh result cache on the agents, and the same evaluation
on the local executor with a fresh cache in the same run (order alternates with ``--agents-first``), then both
reports side by side (verified rate, median and best GFLOPS, WinRate, wall time, the nodes that timed the kernels).
The samples are the same (generation is seeded); only where and when the kernels are timed differs. With
``--rl-steps N`` it also runs the RL stage (``flows/rl_dgemm.py``) for N steps from the SFT checkpoint on each
backend and compares step time, the reward wait per step and the rewards.

Run it in a checkout that has run ``make run`` (data/, checkpoints/):
``.venv/bin/python benchmarks/eval_agents.py --project . [--agents-first] [--rl-steps 20]``; the reports are
``reports/eval_dgemm_{agents,local}_rerun.json`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from flows.agents_stack import agents_stack  # noqa: E402

KEYS = ("verified_rate", "respect_rate", "gflops_median", "gflops_best", "best_vs_numpy", "winrate_vs_sft")


def evaluate(project: Path, report: str, env: dict[str, str]) -> float:
    t0 = time.monotonic()
    subprocess.run([str(project / ".venv" / "bin" / "python"), "-m", "flows.evaluate", "--params", "params.yaml",
                    "--report", report], cwd=project, env=env, text=True, timeout=7200, check=True)
    return time.monotonic() - t0


def train(project: Path, home: Path, name: str, steps: int, env: dict[str, str]) -> dict[str, object]:
    """``steps`` RL steps from the project's SFT checkpoint into a scratch folder; figures from its log."""
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["rl_dgemm"].update(max_steps=steps, save_steps=steps)
    params_file = home / f"params-rl-{name}.yaml"
    params_file.write_text(yaml.safe_dump(params, sort_keys=False))
    out = home / f"rl-{name}"
    t0 = time.monotonic()
    subprocess.run([str(project / ".venv" / "bin" / "python"), "-m", "flows.rl_dgemm", "--params", str(params_file),
                    "--data", "data", "--sft", "checkpoints/sft/final", "--out", str(out)], cwd=project, env=env,
                   text=True, timeout=7200, check=True)
    wall = time.monotonic() - t0
    logs = [h for h in json.loads((out / "final" / "log_history.json").read_text()) if "reward/bench_s" in h]
    med = statistics.median
    return {"wall (s)": round(wall), "step time, median (s)": round(med(h["step_time"] for h in logs), 2),
            "reward wait per step, median (s)": round(med(h["reward/bench_s"] for h in logs), 2),
            "mean reward over steps": round(statistics.mean(h["reward"] for h in logs), 3),
            "share of kernels ok": round(statistics.mean(h["reward/status/ok"] for h in logs), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, default=ROOT, help="a checkout after `make run`")
    ap.add_argument("--agents-first", action="store_true", help="evaluate on the agents before the local run")
    ap.add_argument("--rl-steps", type=int, default=0, help="also run the RL stage this many steps on each backend")
    ap.add_argument("--skip-eval", action="store_true", help="only the RL runs")
    args = ap.parse_args()
    project = args.project.resolve()
    home = Path(tempfile.mkdtemp(prefix="hpcrl-eval-agents-"))
    os.chmod(home, 0o755)
    base = {k: v for k, v in os.environ.items() if not k.startswith("HPCRL_")}
    env = {**base, "HPCRL_SCRATCH_DIR": str(home / "scratch")}
    reports = {"local": "reports/eval_dgemm_local_rerun.json", "agents": "reports/eval_dgemm_agents_rerun.json"}
    wall: dict[str, float] = {}
    rl: dict[str, dict[str, object]] = {}
    cores = sorted(os.sched_getaffinity(0))
    with agents_stack(home / "prefect", project / "params.yaml", agent_cores=[[c] for c in cores],
                      env={**env, "HPCRL_CACHE_DIR": str(home / "cache-agents")}) as stack:
        for name in (("agents", "local") if args.agents_first else ("local", "agents")):
            print(f"evaluating on the {name} backend ...", file=sys.stderr, flush=True)
            run_env = ({**stack.env, "HPCRL_BENCH_BACKEND": "agents"} if name == "agents" else
                       {**env, "HPCRL_CACHE_DIR": str(home / "cache-local")})
            if not args.skip_eval:
                wall[name] = evaluate(project, reports[name], run_env)
            if args.rl_steps:
                rl[name] = train(project, home, name, args.rl_steps, run_env)
    if rl:
        print("\n| RL stage, " + f"{args.rl_steps} steps | " + " | ".join(rl) + " |\n|---|" + "---|" * len(rl))
        for key in rl[next(iter(rl))]:
            print(f"| {key} | " + " | ".join(str(rl[name][key]) for name in rl) + " |")
    if args.skip_eval:
        return 0
    got = {name: json.loads((project / path).read_text()) for name, path in reports.items()}
    for name in ("local", "agents"):
        meta = got[name]["meta"]
        print(f"{name}: {wall[name]:.0f} s, bench_backend={meta.get('bench_backend')}, "
              f"nodes={json.dumps(meta.get('nodes'))}, numpy {meta.get('numpy_gflops')} GFLOPS")
    print("\n| model | figure | local | agents |\n|---|---|---|---|")
    for model in ("sft", "rl"):
        for key in KEYS:
            a, b = got["local"][model].get(key), got["agents"][model].get(key)
            if a is not None or b is not None:
                print(f"| {model} | {key} | {a if a is None else round(a, 3)} | {b if b is None else round(b, 3)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
