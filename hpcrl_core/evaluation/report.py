"""Reports: the one writer of report and sample files, and the summary tables people read.

- ``write_report``: a report as JSON (sorted keys, no NaN), atomically: ``reports/sft.json``,
  ``reports/eval_dgemm.json`` (DVC metrics files).
- ``write_samples``: its sample rows as JSON lines next to it (``samples_path_for``: ``reports/sft.json`` ->
  ``reports/sft_samples.jsonl``), one schema per family (``dgemm.dgemm_rows``; the task families' rows in
  ``runner.py``).
- ``headline``: the fixed rows ``make run`` prints (SFT and RL side by side) from the two reports (rates, GFLOPS,
  best vs numpy, WinRate, the oracle yardstick of ``oracle.py``), ``oracle_line`` (its coverage), and
  ``text_table`` / ``markdown_table`` to show them.

Test: ``pytest tests/evaluation/test_report.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.files import write_text_atomic

# (label, key in a model block of eval_dgemm.json, key in the dgemm block of sft.json or None)
HEADLINE_KEYS: tuple[tuple[str, str, str | None], ...] = (
    ("verified rate", "verified_rate", "verified_rate"),
    ("respect rate", "respect_rate", "respect_rate"),
    ("median GFLOPS", "gflops_median", "gflops_median"),
    ("best GFLOPS", "gflops_best", "gflops_max"),
    ("best vs numpy", "best_vs_numpy", None),
    ("WinRate vs SFT", "winrate_vs_sft", None),
    ("oracle ratio", "oracle_ratio", None),
    ("oracle ratio (rich)", "oracle_ratio_rich", None),
    ("oracle ratio (held-out sets)", "oracle_ratio_held_out", None),
    ("oracle ratio (drawn sets)", "oracle_ratio_drawn", None),
    ("headroom closed", "headroom_closed", None),
    ("headroom closed (median)", "headroom_closed_median", None),
    ("headroom closed (gaps >= 5%)", "headroom_closed_measurable", None),  # oracle.MEASURABLE_GAP (not imported:
    # the summary reads reports without loading the benchmark engine)
    ("headroom closed (gap-weighted)", "headroom_closed_weighted", None),
    ("distinct kernels", "distinct_kernels", None),
)
# (label, family block of sft.json, key): the task families, measured on the SFT policy
TASK_KEYS: tuple[tuple[str, str, str], ...] = (
    ("race F1", "race", "f1"), ("MLPerf exact match", "mlperf", "em"), ("MLPerf tiered score", "mlperf", "avg_score"),
    ("PLP similarity", "plp", "similarity"),
)


def write_report(report: Mapping[str, Any], path: Path) -> None:
    """Write ``report`` as JSON atomically (temp file + rename), creating the folder.

    Raises:
        ValueError: the report holds NaN or infinity (not valid JSON).
    """
    write_text_atomic(path, json.dumps(report, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_samples(rows: Iterable[Mapping[str, Any]], path: Path) -> None:
    """Write sample rows as JSON lines atomically.

    Raises:
        ValueError: a row holds NaN or infinity.
    """
    write_text_atomic(path, "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows))


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The rows of a samples file written by ``write_samples``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def samples_path_for(report: Path) -> Path:
    """Where the sample rows of ``report`` go: ``reports/sft.json`` -> ``reports/sft_samples.jsonl``."""
    return report.with_name(report.stem + "_samples.jsonl")


def headline(sft_report: Mapping[str, Any] | None, eval_report: Mapping[str, Any] | None
             ) -> list[tuple[str, Any, Any]]:
    """Rows (label, SFT, RL) of what ``make run`` prints.

    DGEMM rows come from the comparison (``eval_dgemm.json``, blocks ``sft`` and ``rl``: same problems, same
    samples); without it, SFT's come from the post-SFT report's ``dgemm`` block. The task families are measured
    on the SFT policy only (``sft.json``). A value a report does not have is None.
    """
    ev = eval_report or {}
    sft_dgemm = (sft_report or {}).get("dgemm") or {}
    rows: list[tuple[str, Any, Any]] = []
    for label, key, sft_key in HEADLINE_KEYS:
        sft_value = (ev.get("sft") or {}).get(key)
        if sft_value is None and sft_key is not None:
            sft_value = sft_dgemm.get(sft_key)
        rows.append((label, sft_value, (ev.get("rl") or {}).get(key)))
    for label, family, key in TASK_KEYS:
        rows.append((label, ((sft_report or {}).get(family) or {}).get(key), None))
    return rows


def oracle_line(eval_report: Mapping[str, Any] | None) -> str:
    """One line on the yardstick's coverage: problems with an oracle, corpus kernels timed and verified in this run
    (``eval_dgemm.json``'s ``oracle`` block); says so when the report has none."""
    block = (eval_report or {}).get("oracle")
    if not block:
        return "oracle: none in this report (the evaluation predates it, or has not run)"
    with_oracle, without = block.get("problems_with_oracle", 0), block.get("problems_without_oracle", 0)
    sizes = ",".join(map(str, block.get("sizes") or []))
    line = (f"oracle: {with_oracle} of {with_oracle + without} problems have a corpus kernel they permit "
            f"({without} without, left out of the ratios); {block.get('corpus_distinct', 0)} corpus kernels timed at "
            f"n={sizes} (each problem's own), {block.get('corpus_verified', 0)} verified, "
            f"{block.get('corpus_cached', 0)} of {block.get('corpus_timings', 0)} timings from the result cache")
    if block.get("distinct_kernels") is not None:
        line += (f"; {block['distinct_kernels']} distinct oracle kernels; {block.get('held_out_problems', '-')} "
                 "problems on technique sets no training problem is generated with")
    return line + (f"; {block['note']}" if block.get("note") else "")


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def text_table(rows: Sequence[tuple[str, Any, Any]], columns: tuple[str, str] = ("SFT", "RL")) -> str:
    """A plain-text table of (label, a, b) rows."""
    lines = [f"  {'':<20}{columns[0]:>12}{columns[1]:>12}"]
    lines += [f"  {label:<20}{_fmt(a):>12}{_fmt(b):>12}" for label, a, b in rows]
    return "\n".join(lines)


def markdown_table(rows: Sequence[tuple[str, Any, Any]], columns: tuple[str, str] = ("SFT", "RL")) -> str:
    """A markdown table of (label, a, b) rows."""
    lines = [f"| | {columns[0]} | {columns[1]} |", "|---|---:|---:|"]
    lines += [f"| {label} | {_fmt(a)} | {_fmt(b)} |" for label, a, b in rows]
    return "\n".join(lines)
