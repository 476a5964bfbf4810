"""Benchmark engine figures: executor throughput vs one-at-a-time, timing noise, cache-hit cost, and the engine's
GFLOPS for a blocked OpenMP kernel as a fraction of numpy's DGEMM, all in one run on this machine.

Prints a table and writes it to docs/benchmarks.md (section "Benchmark engine").

Run: ``make bench`` or ``.venv/bin/python benchmarks/bench_throughput.py [--n 512] [--kernels 16]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.doc_sections import write_section  # noqa: E402
from hpcrl_core.bench.cache import ResultCache  # noqa: E402
from hpcrl_core.bench.engine import Engine  # noqa: E402
from hpcrl_core.bench.executor import LocalExecutor  # noqa: E402
from hpcrl_core.bench.reference import ladder_kernels, measure_numpy  # noqa: E402
from hpcrl_core.config import Params, Settings, load_params  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"


def distinct_kernels(count: int) -> list[str]:
    """``count`` distinct correct kernels: the blocked ladder kernel with different tile sizes, and i-k-j ones."""
    blocked, ikj = ladder_kernels()["blocked"], ladder_kernels()["ikj"]
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append(blocked + f"\nstatic const int v{i} = {i};\n")
        else:
            out.append(ikj + f"\nstatic const int v{i} = {i};\n")
    return out


def _time_one_at_a_time(engine: Engine, codes: list[str], slot: tuple[int, ...]) -> tuple[float, int]:
    t0 = time.monotonic()
    ok = sum(engine.run(c, slot).ok for c in codes)
    return time.monotonic() - t0, ok


def _time_executor(engine: Engine, codes: list[str]) -> tuple[float, int]:
    with LocalExecutor(engine) as ex:
        t0 = time.monotonic()
        ok = sum(r.ok for r in ex.map(codes))
        return time.monotonic() - t0, ok


def _repeat_cv(engine: Engine, code: str, slot: tuple[int, ...], times: int) -> tuple[float, float, float]:
    """Time one kernel in ``times`` runs of exactly ``times`` calls each.

    Returns (median over runs of the CV of the ``times`` timed calls, CV of the runs' GFLOPS, median GFLOPS).
    """
    timing = engine.params.timing.model_copy(update={"min_reps": times, "max_reps": times, "max_time_s": 600.0})
    fixed = Engine(engine.params.model_copy(update={"timing": timing}), engine_settings(engine))
    runs = [fixed.run(code, slot) for _ in range(times)]
    g = [r.gflops for r in runs if r.ok and r.gflops]
    within = [r.cv for r in runs if r.cv is not None]
    return statistics.median(within), statistics.pstdev(g) / statistics.fmean(g), statistics.median(g)


def engine_settings(engine: Engine) -> Settings:
    return Settings(cache_dir=engine.cache_dir, scratch_dir=engine.scratch)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--kernels", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args()
    params = load_params(ROOT / "params.yaml") if (ROOT / "params.yaml").exists() else Params()
    bench = params.bench.model_copy(update={"cache": False, **({"n": a.n} if a.n else {})})
    root = Path(tempfile.mkdtemp(prefix="hpcrl-bench-"))
    os.chmod(root, 0o755)
    settings = Settings(cache_dir=root / "cache", scratch_dir=root / "scratch")
    engine = Engine(bench, settings)
    cores = sorted(os.sched_getaffinity(0))
    n = bench.n
    rows: list[tuple[str, str, str]] = []

    codes = distinct_kernels(a.kernels)
    seq_s, seq_ok = _time_one_at_a_time(engine, codes, (cores[0],))
    par_s, par_ok = _time_executor(engine, codes)
    speedup = seq_s / par_s
    rows.append((f"one at a time, {a.kernels} distinct kernels", f"{a.kernels / seq_s:.2f} kernels/s",
                 f"{seq_ok}/{a.kernels} ok, {seq_s:.1f} s"))
    rows.append((f"LocalExecutor, {len(cores)} x 1-core slots", f"{a.kernels / par_s:.2f} kernels/s",
                 f"{par_ok}/{a.kernels} ok, {par_s:.1f} s"))
    rows.append(("executor speed-up (target >= 1.7x)", f"{speedup:.2f}x", "PASS" if speedup >= 1.7 else "MISS"))

    kernels = ladder_kernels()
    for name, slot_cores in (("blocked", (cores[0],)), ("blocked_omp_simd", tuple(cores[:2]))):
        if len(slot_cores) == 2 and len(cores) < 2:
            continue
        cv, across, g = _repeat_cv(engine, kernels[name], slot_cores, a.repeats)
        target = " (target <= 3%)" if len(slot_cores) == 1 else ""
        verdict = ("PASS; " if cv <= 0.03 else "MISS; ") if len(slot_cores) == 1 else ""
        rows.append((f"CV of {a.repeats} timed calls, {name}, {len(slot_cores)}-core slot{target}", f"{100 * cv:.1f}%",
                     f"{verdict}median of {a.repeats} runs; {g:.1f} GFLOPS; across the runs (separate processes) "
                     f"{100 * across:.1f}%"))

    cache = ResultCache(root / "hits.sqlite")
    hit_engine = Engine(params.bench.model_copy(update={"cache": True, "n": n}), settings)
    with LocalExecutor(hit_engine, cache) as ex:
        ex.submit(kernels["ikj"]).result()
        costs = []
        for _ in range(200):
            t0 = time.perf_counter()
            r = ex.submit(kernels["ikj"]).result()
            costs.append(time.perf_counter() - t0)
            assert r.cached
    hit_ms = 1000 * statistics.median(costs)
    rows.append(("cache hit, submit to result (target < 5 ms)", f"{hit_ms:.2f} ms",
                 f"{'PASS' if hit_ms < 5 else 'MISS'}; p95 {1000 * sorted(costs)[189]:.2f} ms"))

    slot = tuple(cores[:2]) if len(cores) >= 2 else (cores[0],)
    omp = engine.run(kernels["blocked_omp_simd"], slot)
    packed = engine.run(kernels["packed"], slot)
    numpy_ref = measure_numpy(n, slot)
    for name, r in (("blocked OpenMP+simd kernel", omp), ("packed kernel (best shipped)", packed)):
        frac = (r.gflops or 0) / numpy_ref.gflops
        rows.append((f"{name}, {len(slot)}-core slot, vs numpy", f"{frac:.2f} of numpy",
                     f"{r.gflops or 0:.1f} vs {numpy_ref.gflops:.1f} GFLOPS ({r.status})"))
    peak = engine.node.peak_gflops(len(slot))
    node = engine.node
    rows.append((f"peak estimate, {len(slot)} cores", f"{peak or 0:.0f} GFLOPS",
                 f"{node.flops_per_cycle} flop/cycle x {node.clock_ghz} GHz ({node.clock_source})"))

    width = max(len(r[0]) for r in rows)
    table = [f"| {'measure':<{width}} | value | notes |", f"|{'-' * (width + 2)}|---|---|"]
    table += [f"| {m:<{width}} | {v} | {note} |" for m, v, note in rows]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = (f"Measured {stamp} on {engine.node.model} ({len(cores)} cores, {platform.machine()}), n = {n}, "
              f"isolation {', '.join(engine.isolation.names) or 'none'}. Command: `make bench`.")
    text = "\n".join([header, "", *table])
    print(text)
    if not a.no_write:
        write_section(DOC, "bench_throughput", text, "## Benchmark engine (`benchmarks/bench_throughput.py`)",
                      "# Benchmarks\n\nFigures printed by the scripts under `benchmarks/`; each rewrites its own "
                      "section.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
