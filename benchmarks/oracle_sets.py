"""Where DGEMM policies fall short of the oracle, per permitted technique set: one row per set over the held-out
problems of one or more evaluation reports, eval-only sets (``problems.HELD_OUT_PERMITTED``, never in SFT data)
marked, so a low ``oracle_ratio`` can be traced to the sets that pull it down.

Each argument is an ``eval_dgemm.json`` or a folder holding one (``benchmarks/experiments_dgemm.py``'s run folders,
``reports/``). Per set, pooled over the reports: problems x reports, the commonest oracle kernel and the median
oracle GFLOPS; per model the median of its per-problem ratio (problem median / oracle, from the report's
``oracle.table``: the same numbers ``oracle_ratio`` is the median of), how many problem-runs reach
``--bar`` x oracle (default 0.85, issue 24's bar on the overall median), and, when the samples file is beside the
report, the kernel kind its verified samples name most often (their ``// plan: <kind>:`` line). With ``--data``,
how many SFT records (``<data>/dgemm/train.jsonl``) pair that oracle kernel with a prompt: a kernel the policy saw
once cannot be expected as its answer (kernels are matched by corpus name, which is per preparation: give the data
the reports' corpus came from). Then per report: overall, eval-only and drawn ratios and the problems at the
bar.

Run: ``.venv/bin/python benchmarks/oracle_sets.py experiments/dgemm/*-sft*-s*/ [--data data] [--models sft rl]
[--bar 0.85]``
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpcrl_core.errors import DataError  # noqa: E402
from hpcrl_core.evaluation.oracle import is_held_out  # noqa: E402
from hpcrl_core.evaluation.report import samples_path_for  # noqa: E402
from hpcrl_core.files import json_lines  # noqa: E402

PLAN = re.compile(r"//\s*plan:\s*([A-Za-z_]+)")


def report_path(arg: Path) -> Path:
    """The report an argument names: the file itself, or ``eval_dgemm.json`` in the folder."""
    path = arg / "eval_dgemm.json" if arg.is_dir() else arg
    if not path.is_file():
        raise DataError(f"{arg}: no eval_dgemm.json there")
    return path


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A report and its sample rows (empty when the samples file is not beside it)."""
    report = json.loads(path.read_text())
    if not (report.get("oracle") or {}).get("table"):
        raise DataError(f"{path}: no oracle table (the report predates the yardstick or has no corpus)")
    samples = samples_path_for(path)
    rows = [row for _, row in json_lines(samples)] if samples.is_file() else []
    return report, rows


def set_key(permitted: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(permitted))


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def kinds_by_set(rows: Sequence[dict[str, Any]], model: str) -> dict[tuple[str, ...], Counter[str]]:
    """Per permitted set, the kinds the model's verified samples name in their plan line."""
    out: dict[tuple[str, ...], Counter[str]] = defaultdict(Counter)
    for row in rows:
        if row.get("model") == model and row.get("status") == "ok":
            found = PLAN.search(row.get("completion") or "")
            out[set_key(row.get("permitted") or [])][found.group(1) if found else "(no plan)"] += 1
    return out


def sft_pairings(data: Path) -> Counter[str]:
    """How many SFT records pair each corpus kernel (by name) with a prompt."""
    path = data / "dgemm" / "train.jsonl"
    if not path.is_file():
        raise DataError(f"{path}: no SFT data there (give the data folder the policies were trained on)")
    return Counter(row["metadata"]["kernel_name"] for _, row in json_lines(path))


def set_table(loaded: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]], models: Sequence[str],
              bar: float, pairings: Counter[str] | None = None) -> list[str]:
    """The per-set rows (module docstring), eval-only sets first, then by set size."""
    problems: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    kinds: dict[str, dict[tuple[str, ...], Counter[str]]] = {m: defaultdict(Counter) for m in models}
    for report, rows in loaded:
        for entry in report["oracle"]["table"]:
            problems[set_key(entry["permitted"])].append(entry)
        for m in models:
            for key, counts in kinds_by_set(rows, m).items():
                kinds[m][key].update(counts)
    head = "| permitted set | eval-only | problem-runs | oracle kernel | oracle GFLOPS |"
    head += " oracle's SFT records |" if pairings is not None else ""
    for m in models:
        head += f" {m} ratio | {m} at {bar} | {m} commonest kind |"
    lines = [head, "|---|---|---:|---|---:|" + ("---:|" if pairings is not None else "")
             + "---:|---:|---|" * len(models)]
    for key in sorted(problems, key=lambda k: (not is_held_out(k), len(k), k)):
        entries = [e for e in problems[key] if e.get("oracle_gflops")]
        oracle = Counter(e["oracle_kernel"] for e in entries).most_common(1)
        cells = [", ".join(key) or "(none)", "yes" if is_held_out(key) else "", str(len(problems[key])),
                 oracle[0][0] if oracle else "-",
                 f"{statistics.median(e['oracle_gflops'] for e in entries):.1f}" if entries else "-"]
        if pairings is not None:
            cells.append(str(pairings[oracle[0][0]]) if oracle else "-")
        for m in models:
            ratios = [e[f"{m}_ratio"] for e in entries if e.get(f"{m}_ratio") is not None]
            common = kinds[m][key].most_common(1)
            cells += [_ratio(statistics.median(ratios) if ratios else None), f"{sum(r >= bar for r in ratios)}",
                      f"{common[0][0]} ({common[0][1]})" if common else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def run_lines(paths: Sequence[Path], loaded: Sequence[tuple[dict[str, Any], list[dict[str, Any]]]],
              models: Sequence[str], bar: float) -> list[str]:
    """Per report and model: overall, eval-only and drawn median ratios and the problems at the bar."""
    lines = []
    for path, (report, _) in zip(paths, loaded, strict=True):
        table = report["oracle"]["table"]
        for m in models:
            split: dict[bool, list[float]] = {True: [], False: []}
            for e in table:
                if e.get(f"{m}_ratio") is not None:
                    split[is_held_out(e["permitted"])].append(e[f"{m}_ratio"])
            every = split[True] + split[False]
            med = {k: statistics.median(v) if v else None for k, v in split.items()}
            overall = statistics.median(every) if every else None
            lines.append(f"- {path.parent.name}/{path.name} {m}: ratio {_ratio(overall)}"
                         f" (eval-only sets {_ratio(med[True])} over {len(split[True])}, drawn {_ratio(med[False])} "
                         f"over {len(split[False])}); {sum(r >= bar for r in every)} of {len(every)} problems at "
                         f"{bar}x oracle")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path, help="eval_dgemm.json files or folders holding one")
    ap.add_argument("--models", nargs="+", default=["sft", "rl"], help="model blocks to read (default: sft rl)")
    ap.add_argument("--bar", type=float, default=0.85, help="ratio counted as reaching the oracle (default 0.85)")
    ap.add_argument("--data", type=Path, default=None, help="data folder of the SFT policies: count how many SFT "
                    "records hold each oracle kernel")
    a = ap.parse_args(argv)
    try:
        paths = [report_path(p) for p in a.reports]
        loaded = [load(p) for p in paths]
        pairings = sft_pairings(a.data) if a.data is not None else None
    except DataError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(set_table(loaded, a.models, a.bar, pairings)))
    print()
    print("\n".join(run_lines(paths, loaded, a.models, a.bar)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
