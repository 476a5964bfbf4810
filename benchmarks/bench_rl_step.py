"""RL step time and the share of it spent waiting for rewards (benchmarking the step's completions).

Runs a short GRPO (``rl_dgemm`` params from params.yaml, ``--steps`` steps) from a saved SFT policy, timing every
optimizer step (a TrainerCallback: step begin to step end, which includes generation, the reward wait, the
reference/policy forward passes and the update) and every call of every reward function (the trainer blocks on
them). The wait share is reward seconds / step seconds. Generation batches of the step run through the reward
functions once, so the two line up step by step. The first step is reported but left out of the medians
(compiler and page-cache warm-up).

Prints a table and writes it to docs/benchmarks.md (section "RL step").

Run: ``make bench-rl`` or ``.venv/bin/python benchmarks/bench_rl_step.py [--steps 8] [--sft checkpoints/sft/final]``
(needs ``dvc repro sft`` first).
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from transformers import TrainerCallback  # noqa: E402

from benchmarks.doc_sections import write_section  # noqa: E402
from hpcrl_core.config import Settings, load_params  # noqa: E402
from hpcrl_core.training.rl import build_rl_trainer  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"


class StepTimer(TrainerCallback):  # type: ignore[misc]
    def __init__(self) -> None:
        self.steps: list[float] = []
        self._t0 = 0.0

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.append(time.perf_counter() - self._t0)


def timed(func: Any, sink: list[float]) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return func(*args, **kwargs)
        finally:
            sink.append(time.perf_counter() - t0)

    return wrapper


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--params", default=str(ROOT / "params.yaml"))
    ap.add_argument("--data", default=str(ROOT / "data"))
    ap.add_argument("--sft", default=str(ROOT / "checkpoints" / "sft" / "final"))
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    a = ap.parse_args()
    params = load_params(a.params)
    params = params.model_copy(update={"rl_dgemm": params.rl_dgemm.model_copy(
        update={"max_steps": a.steps, "save_steps": 10 * a.steps})})
    waits: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hpcrl-bench-rl-") as tmp:
        run = build_rl_trainer(params, Path(a.data), Path(a.sft), Path(tmp), report_to=[], settings=Settings())
        run.trainer.reward_funcs = [timed(f, waits) for f in run.trainer.reward_funcs]
        timer = StepTimer()
        run.trainer.add_callback(timer)
        try:
            run.trainer.train()
        finally:
            run.close()
        stats = [f.last_stats for f in run.reward_funcs if getattr(f, "last_stats", None) is not None]
    rows = list(zip(timer.steps, waits, strict=False))
    steady = rows[1:] or rows
    step_med = statistics.median(s for s, _ in steady)
    share = statistics.median(w / s for s, w in steady)
    overall = sum(w for _, w in steady) / sum(s for s, _ in steady)  # cached steps wait ~0: the median flatters
    rp = params.rl_dgemm
    lines = [
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} ({os.cpu_count()} CPUs), "
        f"`benchmarks/bench_rl_step.py --steps {a.steps}`: policy {a.sft}, G={rp.num_generations}, "
        f"{rp.per_device_train_batch_size} completions/step, max {rp.max_completion_length} new tokens, "
        f"each kernel timed at its problem's n ({', '.join(map(str, params.prepare.dgemm.train_sizes))}).",
        "",
        "| step | step s | reward wait s | wait share |",
        "|---:|---:|---:|---:|",
        *[f"| {i + 1} | {s:.2f} | {w:.2f} | {100 * w / s:.0f}% |" for i, (s, w) in enumerate(rows)],
        "",
        f"Steps 2..{len(rows)}: median step {step_med:.2f} s, median reward-wait share {100 * share:.0f}%, "
        f"reward wait over all their time {100 * overall:.0f}% (target < 35%).",
    ]
    if stats:
        last = stats[-1].metrics()
        lines.append(f"Last batch: cache-hit share {last.get('reward/cache_hit_share', 0):.2f}, "
                     f"engine runs {last.get('reward/runs', 0):.0f}, verified share "
                     f"{last.get('reward/status/ok', 0):.2f}.")
    section = "\n".join(lines)
    print(section)
    if not a.no_write:
        write_section(DOC, "bench_rl_step", section, "## RL step", "# Benchmarks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
