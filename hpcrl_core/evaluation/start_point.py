"""The HARGO start point's report: is the SFT policy every method starts from good enough to compare RL methods on?

RL cannot be judged on a family the start point cannot do at all, so the ``sft_hargo`` stage scores its policy on
the held-out items (``hargo.evaluate_model``) and states, next to each figure, the bar it must reach:

- race F1 (pooled over C and Fortran, positive = race) >= 0.85,
- MLPerf mean tiered score >= 0.35,
- PLP similarity (mean MiniLM cosine) >= 0.6.

The report (``reports/sft_hargo.json``) says which bars are met; a start point that misses one is reported, not
hidden, and the comparison still runs (its table then says less about that family).

Test: ``pytest tests/evaluation/test_start_point.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.config import Params
from hpcrl_core.evaluation.hargo import Row, evaluate_model, load_items, method_metrics

# metric of method_metrics -> the bar the start point must reach (issue: "a start point worth comparing from")
BARS: dict[str, float] = {"race_f1": 0.85, "mlperf_avg_score": 0.35, "plp_similarity": 0.6}
KEPT = ("race_f1", "mlperf_em", "mlperf_avg_score", "plp_similarity", "accuracy_race_c", "accuracy_race_fortran",
        "accuracy_mlperf", "accuracy_plp", "degenerate_share", "mlperf_length_mean")


def start_point_report(rows: Sequence[Row]) -> dict[str, Any]:
    """The start point's figures, its bars and whether each is met.

    Args:
        rows: ``hargo.score_items`` rows of the SFT policy on the held-out items.

    Returns:
        ``{<metric>: value for KEPT}`` plus ``race`` (counts), ``n`` (items per family), ``length_by_family``,
        ``degenerate_by_family``, ``bars`` ({metric: bar}), ``meets`` ({metric: bool}; False for a missing family)
        and ``meets_all``.
    """
    metrics = method_metrics(rows, rows)
    report: dict[str, Any] = {k: metrics[k] for k in KEPT}
    for k in ("race", "n", "length_by_family", "degenerate_by_family"):
        report[k] = metrics[k]
    meets = {k: metrics[k] is not None and metrics[k] >= bar for k, bar in BARS.items()}
    report.update({"bars": dict(BARS), "meets": meets, "meets_all": all(meets.values())})
    return report


def bars_line(report: dict[str, Any]) -> str:
    """One line for the log: each bar's value, the bar and whether it is met."""
    parts = []
    for k, bar in report["bars"].items():
        value = report[k]
        shown = "n/a" if value is None else f"{value:.3f}"
        parts.append(f"{k} {shown} (bar {bar:g}: {'met' if report['meets'][k] else 'MISSED'})")
    return "; ".join(parts)


def evaluate_start_point(model_dir: Path, data_dir: Path, params: Params,
                         progress: Callable[[str], None] | None = None) -> tuple[dict[str, Any], list[Row]]:
    """Score the policy in ``model_dir`` on the held-out items under ``data_dir`` (``evaluate_hargo`` settings).

    Returns:
        ``(report, rows)``: ``start_point_report`` plus ``meta`` (model folder, notes on missing families), and the
        per-item rows.
    """
    notes: dict[str, str] = {}
    rows = evaluate_model(model_dir, load_items(data_dir, params, notes), params, progress=progress)
    return {**start_point_report(rows), "meta": {"model_dir": str(model_dir), "notes": notes}}, rows
