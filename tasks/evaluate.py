"""Prefect tasks of the evaluate_dgemm stage: the held-out evaluation of SFT and RL and its plots.

No retries: sampling is seeded and a failed benchmark infrastructure raises a typed error the operator must see.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from hpcrl_core.config import Params, Settings
from hpcrl_core.errors import DataError
from hpcrl_core.evaluation import dgemm, discovery, plots
from hpcrl_core.evaluation.report import samples_path_for, write_report, write_samples
from tasks import agents_backend  # noqa: F401  registers the agents backend (HPCRL_BENCH_BACKEND=agents)


@task(cache_policy=NO_CACHE)
def evaluate_dgemm(models: dict[str, Path], data_dir: Path, params: Params, report: Path) -> dict[str, Any]:
    """Evaluate, write ``report`` and ``<report>_samples.jsonl``, and plot the GFLOPS distributions next to it."""
    logger = get_run_logger()
    result, rows = dgemm.evaluate_dgemm(models, data_dir, params, Settings(), progress=logger.info)
    write_report(result, report)
    write_samples(rows, samples_path_for(report))
    plots.plot_gflops_distributions(dgemm.rows_by_model(rows), report.with_name(report.stem + "_gflops.png"))
    return result


@task(cache_policy=NO_CACHE)
def plot_training_curves(log_history: Path, out: Path) -> bool:
    """Plot reward and GFLOPS over the RL steps when the run left its log history, and log when it first sampled a
    fast kernel (``hpcrl_core/evaluation/discovery.py``); False when there is no history."""
    if not log_history.is_file():
        get_run_logger().warning("%s is missing; no training-curve plot", log_history)
        return False
    history = json.loads(log_history.read_text())
    plots.plot_training_curves(history, out)
    with contextlib.suppress(DataError):  # a history without the reward's figures has no discovery to tell
        found = discovery.discovery(history)
        get_run_logger().info("RL training: a kernel of %.1fx numpy or faster sampled %s; %s (best %.2fx, last "
                              "steps %.2fx)", discovery.THRESHOLD,
                              "never" if found.first_step is None else f"first at step {found.first_step}",
                              found.verdict, found.best, found.tail_best)
    return True
