"""What people read of the HARGO comparison (``reports/eval_hargo.json``, made by ``hargo.comparison_report``): a
markdown table with intervals, a sentence on what one item is worth, and a bar plot with interval whiskers.

- ``markdown_table``: one row per model (``sft`` first): WinRate vs SFT, race F1, PLP similarity, MLPerf EM and
  MLPerf score as ``mean [lo, hi]``, then the degenerate share and the mean MLPerf answer length (seed-means).
- ``what_one_item_is_worth``: how much one item moves each rate (1/n per family), printed under the table.
- ``differences_table``: HARGO minus each other method with the paired interval of the difference, marked where the
  interval excludes 0.
- ``plot_comparison``: one panel per headline metric, a bar per model at its seed-mean, whiskers at the interval,
  dots at the single seeds (matplotlib, Agg backend, written atomically).
- ``write_comparison``: the report with its samples, table and plot, written beside each other;
  ``read_comparison_samples`` reads the samples back (to rebuild the report without answering again).

Test: ``pytest tests/evaluation/test_hargo_report.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hpcrl_core.evaluation.plots import _save, plt
from hpcrl_core.evaluation.report import read_samples, samples_path_for, write_report, write_samples
from hpcrl_core.files import write_text_atomic

# (column label, headline metric) shown as "mean [lo, hi]"
TABLE_METRICS: tuple[tuple[str, str], ...] = (
    ("WinRate vs SFT", "winrate"), ("race F1", "race_f1"), ("PLP sim", "plp_similarity"),
    ("MLPerf EM", "mlperf_em"), ("MLPerf score", "mlperf_avg_score"),
)
# (column label, headline metric, format) shown as the seed-mean alone
PLAIN_METRICS: tuple[tuple[str, str, str], ...] = (
    ("degenerate", "degenerate_share", "{:.3f}"), ("MLPerf length (chars)", "mlperf_length_mean", "{:.1f}"),
)


def models(report: Mapping[str, Any]) -> list[str]:
    """The model blocks of a comparison report, in report order (``sft`` first)."""
    return [name for name in report if name != "meta"]


def _with_interval(entry: Mapping[str, Any] | None) -> str:
    if entry is None:
        return "-"
    lo, hi = entry["ci"]
    return f"{entry['mean']:.3f} [{lo:.3f}, {hi:.3f}]"


def what_one_item_is_worth(report: Mapping[str, Any]) -> str:
    """A sentence saying how much one item moves a single run's rate, per family (1/n), from ``meta.one_item``."""
    worth = report["meta"]["one_item"]
    parts = ", ".join(f"{family} {value:.4f}" for family, value in worth.items())
    return (f"One item moves a single run's rate by 1/n: {parts} (race = pooled race accuracy; all = WinRate and the "
            "degenerate share); it moves a seed-mean over k seeds by a k-th of that.")


def markdown_table(report: Mapping[str, Any]) -> str:
    """A markdown table of the comparison, one row per model, a footer naming the interval and item counts, and the
    differences table (``differences_table``) when the report has a reference.

    Args:
        report: ``hargo.comparison_report``'s dict (or ``reports/eval_hargo.json`` read back).

    Returns:
        The table and its footer lines, joined by newlines (no trailing newline).
    """
    meta = report["meta"]
    header = ["model", "seeds", *(label for label, _ in TABLE_METRICS), *(label for label, _, _ in PLAIN_METRICS)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for name in models(report):
        block = report[name]
        cells = [name, str(len(block["seeds"]))]
        cells += [_with_interval(block["metrics"][key]) for _, key in TABLE_METRICS]
        cells += ["-" if block["metrics"][key] is None else fmt.format(block["metrics"][key]["mean"])
                  for _, key, fmt in PLAIN_METRICS]
        lines.append("| " + " | ".join(cells) + " |")
    items = ", ".join(f"{family} {n}" for family, n in meta["items"].items())
    lines += ["", f"Mean over seeds [{meta['confidence']:.0%} interval: percentile bootstrap over items, "
                  f"{meta['resamples']} resamples, paired with the SFT answers]. Items: {items}.",
              what_one_item_is_worth(report)]
    differences = differences_table(report)
    return "\n".join(lines + (["", differences] if differences else []))


def differences_table(report: Mapping[str, Any]) -> str:
    """A markdown table of ``meta.vs_reference``: the reference's seed-mean minus each method's as ``diff [lo, hi]``,
    with ``*`` where the paired interval excludes 0; "" when the report has no reference."""
    meta = report["meta"]
    vs = meta.get("vs_reference") or {}
    if not vs:
        return ""
    ref = meta["reference"]
    header = ["method", *(f"{label} ({ref} - method)" for label, _ in TABLE_METRICS)]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for method, metrics in vs.items():
        cells = [method]
        for _, key in TABLE_METRICS:
            entry = metrics.get(key)
            cells.append("-" if entry is None else f"{entry['diff']:+.3f} [{entry['ci'][0]:+.3f}, "
                                                   f"{entry['ci'][1]:+.3f}]{' *' if entry['excludes_zero'] else ''}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"{ref} minus each method, seed-means [{meta['confidence']:.0%} paired bootstrap interval of the "
                  "difference over the same resampled items]; * marks an interval that excludes 0."]
    return "\n".join(lines)


def plot_comparison(report: Mapping[str, Any], path: Path, title: str = "") -> None:
    """Bars of each model's seed-mean per headline metric, whiskers at the interval, dots at the seeds; PNG.

    Args:
        report: ``hargo.comparison_report``'s dict.
        path: the PNG to write (folders are created; written atomically).
        title: the figure's title; a default names the interval.
    """
    names = models(report)
    fig, axes = plt.subplots(1, len(TABLE_METRICS), figsize=(3.2 * len(TABLE_METRICS), 4.2), sharey=False)
    for ax, (label, key) in zip(axes, TABLE_METRICS, strict=True):
        for i, name in enumerate(names):
            entry = report[name]["metrics"][key]
            if entry is None:
                continue
            lo, hi = entry["ci"]
            mean = entry["mean"]
            ax.bar(i, mean, color=f"C{i}", alpha=0.75)
            ax.errorbar(i, mean, yerr=[[max(mean - lo, 0.0)], [max(hi - mean, 0.0)]], color="black", capsize=4)
            seeds = list(entry["seeds"].values())
            ax.scatter([i + 0.12 * (j - (len(seeds) - 1) / 2) for j in range(len(seeds))], seeds, s=12,
                       color="black", zorder=3)
        if key == "winrate":
            ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)  # no difference from SFT
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
        ax.set_title(label)
        ax.grid(axis="y", alpha=0.3)
    meta = report["meta"]
    fig.suptitle(title or f"HARGO comparison on held-out items: seed-mean, {meta['confidence']:.0%} bootstrap "
                          f"interval over items, dots = seeds")
    _save(fig, path)


Rows = Sequence[Mapping[str, Any]]


def write_comparison(report: Mapping[str, Any], sft_rows: Rows, runs: Mapping[str, Mapping[int, Rows]], out: Path,
                     title: str = "") -> None:
    """Write the comparison beside ``out``: the report (``out``, JSON), every scored item (``<out>_samples.jsonl``,
    rows with ``model``, ``seed`` and the item's fields), the table (``<out>.md``) and the plot (``<out>.png``)."""
    write_report(dict(report), out)
    samples = [{"model": "sft", "seed": None, **r} for r in sft_rows]
    samples += [{"model": m, "seed": s, **r} for m, seeds in runs.items() for s, rows in seeds.items() for r in rows]
    write_samples(samples, samples_path_for(out))
    write_text_atomic(out.with_suffix(".md"), markdown_table(report) + "\n")
    plot_comparison(report, out.with_suffix(".png"), title=title)


def read_comparison_samples(path: Path) -> tuple[list[dict[str, Any]], dict[str, dict[int, list[dict[str, Any]]]]]:
    """The SFT rows and ``{method: {seed: rows}}`` of a samples file that ``write_comparison`` wrote, in file order.

    Raises:
        ValueError: the file holds no ``sft`` rows, or a row has no ``model``.
    """
    sft: list[dict[str, Any]] = []
    runs: dict[str, dict[int, list[dict[str, Any]]]] = {}
    for n, row in enumerate(read_samples(path), 1):
        if "model" not in row:
            raise ValueError(f"{path}:{n}: a row without 'model'; expected the samples of a HARGO comparison")
        model, seed = row.pop("model"), row.pop("seed")
        if model == "sft":
            sft.append(row)
        else:
            runs.setdefault(str(model), {}).setdefault(int(seed), []).append(row)
    if not sft:
        raise ValueError(f"{path}: no rows of the SFT model; expected the samples of a HARGO comparison")
    return sft, runs
