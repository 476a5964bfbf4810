"""Issue 24's targets for a DGEMM RL run, judged on its held-out report (``reports/eval_dgemm.json``).

Per run: RL's oracle ratio >= 0.85, its ratio on problems that permit 4-5 techniques >= 0.6, its best kernel >=
0.8x numpy on the same core at the same size, its verified rate at most 5 points below SFT's, and at least half of
SFT's distinct verified kernels. Over several runs: the mean headroom closed >= 0.5. Definitions of the figures:
docs/sqd.md, "The held-out evaluation". ``benchmarks/experiments_dgemm.py`` prints the verdict per run,
``benchmarks/rl_discovery.py`` the fast-kernel part of it beside when training first sampled a fast kernel
(``discovery.py``, whose threshold is ``BEST_VS_NUMPY``).

Test: ``pytest tests/evaluation/test_targets.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ORACLE_RATIO = 0.85
ORACLE_RATIO_RICH = 0.6
BEST_VS_NUMPY = 0.8
VERIFIED_DROP = 0.05  # RL's verified rate may sit this far below SFT's
DISTINCT_SHARE = 0.5  # of SFT's distinct verified kernels
HEADROOM_CLOSED = 0.5  # on the mean over runs, not per run

# (model, report key, lower bound) for the per-run bars on a single figure
FIGURE_BARS = (("rl", "oracle_ratio", ORACLE_RATIO), ("rl", "oracle_ratio_rich", ORACLE_RATIO_RICH),
               ("rl", "best_vs_numpy", BEST_VS_NUMPY))


def _g(value: float | None) -> str:
    return "None" if value is None else f"{value:.3g}"


def missed_bars(report: Mapping[str, Any]) -> list[str]:
    """The per-run bars ``report`` misses, one line each naming the figure and its bar (empty: it meets them all).
    A figure the report lacks counts as missed.

    Args:
        report: an evaluation report with ``sft`` and ``rl`` blocks (``evaluate_dgemm``).
    """
    rl, sft = report["rl"], report["sft"]
    missed = [f"{key} {_g(report[model].get(key))} < {bar}" for model, key, bar in FIGURE_BARS
              if report[model].get(key) is None or report[model][key] < bar]
    if rl["verified_rate"] < sft["verified_rate"] - VERIFIED_DROP:
        missed.append(f"verified {rl['verified_rate']:.3f} < SFT's {sft['verified_rate']:.3f} - {VERIFIED_DROP}")
    distinct, sft_distinct = rl.get("distinct_kernels"), sft.get("distinct_kernels") or 0
    if distinct is None or distinct < DISTINCT_SHARE * sft_distinct:
        missed.append(f"distinct kernels {distinct} < half of SFT's {sft.get('distinct_kernels')}")
    return missed


def fast_bars_met(rl: Mapping[str, Any]) -> bool:
    """The bars only fast kernels meet: best >= ``BEST_VS_NUMPY`` x numpy and the 4-5-technique oracle ratio >=
    ``ORACLE_RATIO_RICH``, on an ``rl`` block of a report."""
    best, rich = rl.get("best_vs_numpy") or 0.0, rl.get("oracle_ratio_rich") or 0.0
    return best >= BEST_VS_NUMPY and rich >= ORACLE_RATIO_RICH
