"""Plots of the DGEMM evaluation and of an RL run, as PNG files (matplotlib, Agg backend: no display needed).

- ``plot_gflops_distributions``: per model, the GFLOPS of its verified held-out kernels (box + points), with the
  verified rate in the label — SFT vs RL at a glance.
- ``plot_training_curves``: reward and GFLOPS of the verified completions over RL steps, from the trainer's log
  history (``reward/gflops_median``, ``reward/gflops_max``, ``reward`` as TRL logs them).

Test: ``pytest tests/evaluation/test_dgemm.py`` (both plots, with and without a log history).
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from hpcrl_core.files import write_bytes_atomic  # noqa: E402

STEP_SERIES = (("reward", "mean reward"), ("reward/gflops_median", "median GFLOPS (verified)"),
               ("reward/gflops_max", "best GFLOPS (verified)"))


def plot_gflops_distributions(rows: Mapping[str, Sequence[Mapping[str, Any]]], path: Path, title: str = "") -> None:
    """Box plot + jittered points of verified kernels' GFLOPS per model; models without any are shown empty."""
    names = list(rows)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.8 * len(names) + 2), 4.5))
    data, labels = [], []
    for i, name in enumerate(names):
        gflops = [float(r["gflops"]) for r in rows[name] if r["status"] == "ok" and r.get("gflops") is not None]
        total = len(rows[name])
        data.append(gflops)
        labels.append(f"{name}\n{len(gflops)}/{total} verified")
        xs = [i + 1 + 0.08 * ((j % 7) - 3) for j in range(len(gflops))]
        ax.scatter(xs, gflops, s=10, alpha=0.6)
    ax.boxplot([d if d else [float("nan")] for d in data], showfliers=False)
    ax.set_xticks(range(1, len(names) + 1), labels)
    ax.set_ylabel("GFLOPS (held-out problems, 1 core)")
    ax.set_ylim(bottom=0)
    ax.set_title(title or "Verified kernels on held-out DGEMM problems")
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)


def plot_training_curves(log_history: Sequence[Mapping[str, Any]], path: Path, title: str = "") -> None:
    """Reward and verified GFLOPS per logged RL step (series missing from the history are left out)."""
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    plotted = 0
    for key, label in STEP_SERIES:
        points = [(e["step"], float(e[key])) for e in log_history if key in e and "step" in e]
        if not points:
            continue
        ax = axes[0] if key == "reward" else axes[1]
        ax.plot(*zip(*points, strict=True), marker=".", label=label)
        plotted += 1
    axes[0].set_ylabel("reward")
    axes[1].set_ylabel("GFLOPS")
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    if not plotted:
        axes[0].text(0.5, 0.5, "no logged steps", ha="center", va="center", transform=axes[0].transAxes)
    fig.suptitle(title or "RL on DGEMM: reward and GFLOPS over steps")
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_bytes_atomic(path, buf.getvalue())
