"""Across-run spread over a long stretch: every shipped kernel and an allocating one, each in fresh engine runs
one after another for ``--seconds``, with a cache of its own (so the node's host-speed reference starts empty).

Prints, per kernel: the median figure, the spread (max/min - 1) over all runs and over the runs not marked
disturbed, the median and worst spread of 10 consecutive runs not disturbed, and the disturbed share; then the
host-speed reference at the start and the end. Where ``make bench`` takes 10 runs per kernel in one window,
this shows how the figure and the disturbed share hold over minutes of host noise (docs/bench.md, "Timing").

Run: ``.venv/bin/python benchmarks/bench_spread.py [--n 256] [--seconds 300] [--core 1] [--jsonl FILE]``
(the reward's short timing at n = 256 by default; ``--jsonl`` keeps every run's figure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_throughput import ALLOCATING, spread  # noqa: E402
from hpcrl_core.bench.engine import Engine  # noqa: E402
from hpcrl_core.bench.reference import ladder_kernels  # noqa: E402
from hpcrl_core.config import Params, Settings, load_params  # noqa: E402

WINDOW = 10


def windows(xs: list[float]) -> list[float]:
    """Spreads of every run of ``WINDOW`` consecutive figures (one spread of all when there are fewer)."""
    if len(xs) < WINDOW:
        return [spread(xs)] if len(xs) >= 2 else []
    return [spread(xs[i:i + WINDOW]) for i in range(len(xs) - WINDOW + 1)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--core", type=int, default=None, help="the 1-core slot (default: the last allowed core)")
    ap.add_argument("--jsonl", type=Path, default=None)
    a = ap.parse_args()
    params = load_params(ROOT / "params.yaml") if (ROOT / "params.yaml").exists() else Params()
    root = Path(tempfile.mkdtemp(prefix="hpcrl-spread-"))
    os.chmod(root, 0o755)
    engine = Engine(params.bench.model_copy(update={"cache": False}).for_many(a.n),
                    Settings(cache_dir=root / "cache", scratch_dir=root / "scratch"))
    core = a.core if a.core is not None else sorted(os.sched_getaffinity(0))[-1]
    kernels = {**ladder_kernels(), "allocating (malloc per call)": ALLOCATING}
    runs: dict[str, list[tuple[float, bool]]] = {name: [] for name in kernels}
    refs: list[float] = []
    out = a.jsonl.open("w") if a.jsonl else None
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        for name, code in kernels.items():
            r = engine.run(code, (core,))
            if not r.ok or not r.gflops:
                print(f"{name}: {r.status} {r.detail}", file=sys.stderr)
                continue
            runs[name].append((float(r.gflops), r.disturbed))
            if (ref := engine.speed(a.n).reference) is not None:
                refs.append(ref)
            if out:
                out.write(json.dumps({"kernel": name, "gflops": r.gflops, "disturbed": r.disturbed,
                                      "extra": r.extra}) + "\n")
        print(f"\r{sum(map(len, runs.values()))} runs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"n = {a.n}, short timing, 1-core slot (core {core}), {a.seconds:.0f} s of fresh runs on "
          f"{engine.node.model}:\n")
    print("| kernel | runs | GFLOPS (median) | spread, all runs | spread, runs not disturbed | 10-run windows not "
          "disturbed: median / worst spread | disturbed |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rs in runs.items():
        if not rs:
            print(f"| {name} | 0 | | | | | |")
            continue
        g = [x for x, _ in rs]
        settled = [x for x, d in rs if not d]
        win = windows(settled)
        win_text = f"{100 * statistics.median(win):.1f}% / {100 * max(win):.1f}%" if win else "-"
        settled_text = f"{100 * spread(settled):.1f}%" if len(settled) >= 2 else "-"
        print(f"| {name} | {len(rs)} | {statistics.median(g):.2f} | {100 * spread(g):.1f}% | {settled_text} | "
              f"{win_text} | {sum(d for _, d in rs)}/{len(rs)} |")
    if refs:
        print(f"\nhost-speed reference: {1e6 * refs[0]:.2f} us after the first run, {1e6 * refs[-1]:.2f} us at the "
              f"end (min {1e6 * min(refs):.2f}, max {1e6 * max(refs):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
