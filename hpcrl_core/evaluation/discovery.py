"""When an RL run first sampled a fast kernel, and whether it kept writing one: read from the run's log history.

A DGEMM RL run that ends without fast kernels on held-out problems can have failed in three different ways, and each
asks for a different remedy: it never sampled one (exploration), it sampled one too late to learn it (curriculum
pace, steps), or it sampled one and stopped (forgetting). The log history tells them apart. Per logged step the
reward logs ``reward/gflops_max`` (the fastest verified completion of the step's groups) and
``reward/reference_gflops`` (numpy's DGEMM on the same core in the same run); their ratio is the step's best kernel
as a fraction of numpy, the unit of issue 24's best-kernel bar.

``discovery(history, threshold)`` gives:

- ``best``: the highest ratio over the run;
- ``first_step``: the first step whose ratio reached ``threshold`` (None: never);
- ``tail_best``: the highest ratio over the last ``tail`` share of the logged steps;
- ``verdict``: ``never`` (no step reached it), ``lost`` (reached, but no step of the tail did), ``late`` (kept, but
  first reached after ``late`` of the run's steps) or ``kept``.

A step's maximum is over the 8 completions of one group, so ``lost`` means no group of the tail sampled a fast kernel,
not that the policy cannot write one; the held-out evaluation is the judge of that.

Test: ``pytest tests/evaluation/test_discovery.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpcrl_core.errors import DataError
from hpcrl_core.evaluation.targets import BEST_VS_NUMPY

THRESHOLD = BEST_VS_NUMPY  # issue 24's bar for the best held-out kernel, as a fraction of numpy
# the file RL final folders keep their log history in (training.checkpoints.LOG_HISTORY; not imported, so the
# evaluation stage does not depend on the training package)
LOG_HISTORY = "log_history.json"
VERDICTS = ("never", "lost", "late", "kept")


@dataclass(frozen=True)
class Discovery:
    """What ``discovery`` read from one run (module docstring)."""

    steps: int
    best: float
    first_step: int | None
    tail_best: float
    verdict: str


def history_file(folder: Path) -> Path:
    """The log history of the RL run in ``folder``: an experiments run folder (``rl/final/log_history.json``) or an
    RL final folder (``checkpoints/rl_dgemm/final``).

    Raises:
        DataError: ``folder`` holds neither.
    """
    for path in (folder / "rl" / "final" / LOG_HISTORY, folder / LOG_HISTORY):
        if path.is_file():
            return path
    raise DataError(f"{folder}: no rl/final/{LOG_HISTORY} or {LOG_HISTORY}; pass an experiments run folder or an "
                    "RL final folder")


def read_history(folder: Path) -> list[dict[str, Any]]:
    """The log history of the RL run in ``folder`` (``history_file``), as the trainer wrote it.

    Raises:
        DataError: no history there, or one that is not a JSON list of step entries.
    """
    path = history_file(folder)
    try:
        history = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: cannot read the log history ({e})") from None
    if not isinstance(history, list) or not all(isinstance(entry, dict) for entry in history):
        raise DataError(f"{path}: not a trainer log history (a JSON list of step entries)")
    return history


def step_ratios(history: Sequence[Mapping[str, Any]]) -> list[tuple[int, float]]:
    """(step, best verified GFLOPS / numpy's) for every logged step that has both figures and a positive reference."""
    out = []
    for entry in history:
        best, ref = entry.get("reward/gflops_max"), entry.get("reward/reference_gflops")
        if "step" in entry and best is not None and ref is not None and float(ref) > 0:
            out.append((int(entry["step"]), float(best) / float(ref)))
    return out


def discovery(history: Sequence[Mapping[str, Any]], threshold: float = THRESHOLD, tail: float = 0.15,
              late: float = 0.5) -> Discovery:
    """Read when the run first sampled a kernel of at least ``threshold`` x numpy and whether its tail still did.

    Args:
        history: the trainer's log history (``log_history.json`` of an RL run's final folder), in step order.
        threshold: the fraction of numpy that counts as fast.
        tail: the share of the logged steps, at the end, that ``tail_best`` and ``lost`` look at.
        late: the share of the run's steps after which a first fast kernel counts as ``late``.

    Raises:
        DataError: no logged step carries both ``reward/gflops_max`` and ``reward/reference_gflops``.
    """
    if not (0 < tail <= 1 and 0 <= late <= 1 and threshold > 0):
        raise ValueError(f"tail {tail} must be in (0, 1], late {late} in [0, 1], threshold {threshold} > 0")
    points = sorted(step_ratios(history))
    if not points:
        raise DataError("the log history has no step with reward/gflops_max and reward/reference_gflops; it is not "
                        "the history of a DGEMM RL run (checkpoints/rl_dgemm/final/log_history.json)")
    steps = points[-1][0]
    first = next((step for step, ratio in points if ratio >= threshold), None)
    tail_points = points[-max(1, round(tail * len(points))):]
    tail_best = max(ratio for _, ratio in tail_points)
    if first is None:
        verdict = "never"
    elif tail_best < threshold:
        verdict = "lost"
    elif first > late * steps:
        verdict = "late"
    else:
        verdict = "kept"
    return Discovery(steps=steps, best=max(ratio for _, ratio in points), first_step=first, tail_best=tail_best,
                     verdict=verdict)


def describe(d: Discovery) -> str:
    """One cell for a table: ``kept (step 133, best 1.10x)`` or ``never (best 0.65x)``."""
    where = "" if d.first_step is None else f"step {d.first_step}, "
    return f"{d.verdict} ({where}best {d.best:.2f}x)"
