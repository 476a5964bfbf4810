"""DGEMM samples whose tile width disagrees with their vector constants: ``NR`` defined as a number other than
``VW * NV``, and, with ``--rerun``, what those kernels do with the width derived (``#define NR (VW * NV)``, the form
``prepare.dgemm.derived_nr`` writes; docs/data.md).

Packed kernels and array-form vector tiles step through C, pack B and size their buffers by NR, while their
micro-kernel stores NV vectors of VW doubles. A policy that writes another VW or NV than the kernel it learnt from,
and keeps NR's number, writes a kernel that leaves columns of C unwritten or overruns a buffer. This counts such
samples per evaluation and model, by status; ``--rerun`` benchmarks each of them again with only its NR line changed,
at its problem's n, with the evaluation's backend and result cache, and reports how many verify, how many of those
use only the techniques their problem permits, and their GFLOPS.

Each argument is an evaluation's samples file (``eval_dgemm_samples.jsonl``) or a folder holding one
(``benchmarks/experiments_dgemm.py``'s run folders, ``reports/``). A sample counts when its code defines ``VW``,
``NV`` and ``NR`` as integers with ``#define``.

Run: ``.venv/bin/python benchmarks/tile_width.py experiments/dgemm/*-sft*-s*/ [--models rl sft] [--rerun]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.register_tiles import integer_define, integer_defines, samples_file  # noqa: E402
from hpcrl_core.bench.extract import extract_code  # noqa: E402
from hpcrl_core.errors import DataError  # noqa: E402
from hpcrl_core.files import json_lines  # noqa: E402

_NR = integer_define("NR")


def width_mismatch(code: str) -> tuple[int, int, int] | None:
    """(VW, NV, NR) when the code defines all three as integers and NR != VW * NV, else None."""
    values = integer_defines(code, ("VW", "NV", "NR"))
    if values is None:
        return None
    vw, nv, nr = values
    return (vw, nv, nr) if nr != vw * nv else None


def derive_width(code: str) -> str:
    """The code with its ``#define NR <number>`` line(s) replaced by ``#define NR (VW * NV)``."""
    return _NR.sub("#define NR (VW * NV)", code)


def kernel_source(completion: str) -> str:
    """The C source of a completion as the engine extracts it (``bench.extract.extract_code``, no size limit), or
    the whole text when it holds no ``dgemm``."""
    return extract_code(completion, sys.maxsize).code or completion


@dataclass
class Tally:
    """One (report, model): samples read, mismatched samples by status, and the rerun's outcome."""

    samples: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    shapes: Counter[tuple[int, int, int]] = field(default_factory=Counter)
    rerun: list[tuple[str, int, tuple[str, ...]]] = field(default_factory=list)  # (code, n, permitted)
    verified: int = 0
    respecting: int = 0
    gflops: list[float] = field(default_factory=list)


def collect(path: Path, models: Sequence[str]) -> dict[str, Tally]:
    """Per model, the samples of ``path`` whose tile width disagrees with VW x NV.

    Raises:
        DataError: a sample lacks its completion, status or (for ``--rerun``) n.
    """
    out = {m: Tally() for m in models}
    for line, row in json_lines(path):
        model = str(row.get("model", "?"))
        if model not in out:
            continue
        completion, status = row.get("completion"), row.get("status")
        if not isinstance(completion, str) or not isinstance(status, str):
            raise DataError(f"{path}:{line}: a sample without a completion or status")
        tally = out[model]
        tally.samples += 1
        code = kernel_source(completion)
        shape = width_mismatch(code)
        if shape is None:
            continue
        n = row.get("n")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise DataError(f"{path}:{line}: a sample without its problem's n")
        tally.statuses[status] += 1
        tally.shapes[shape] += 1
        tally.rerun.append((derive_width(code), n, tuple(str(t) for t in row.get("permitted") or ())))
    return out


def rerun(tallies: Sequence[Tally]) -> None:
    """Benchmark every mismatched kernel of ``tallies`` with its width derived, all submitted at once."""
    jobs = [job for t in tallies for job in t.rerun]
    if not jobs:
        return
    from hpcrl_core.bench.executor import map_sized  # the evaluation's imports take seconds: only when needed
    from hpcrl_core.config import Settings, load_params
    from hpcrl_core.evaluation.dgemm import evaluation_executor
    params = load_params(ROOT / "params.yaml")
    with evaluation_executor(params, Settings()) as ex:
        results = iter(map_sized(ex, [(code, n) for code, n, _ in jobs]))
    for t in tallies:
        for _, _, permitted in t.rerun:
            r = next(results)
            if r.ok and r.gflops is not None:
                t.verified += 1
                t.respecting += set(r.techniques) <= set(permitted)
                t.gflops.append(float(r.gflops))


def rows(tallies: dict[tuple[str, str], Tally], reran: bool) -> list[str]:
    head = "| report | model | samples | NR != VW x NV | their statuses | (VW, NV, NR) |"
    rule = "|---|---|---:|---:|---|---|"
    if reran:
        head += " verified with NR derived | of them respecting | median GFLOPS (range) |"
        rule += "---:|---:|---|"
    out = [head, rule]
    for (report, model), t in tallies.items():
        statuses = ", ".join(f"{s} {k}" for s, k in t.statuses.most_common()) or "-"
        shapes = ", ".join(f"{s} x{k}" for s, k in t.shapes.most_common(3)) or "-"
        line = f"| {report} | {model} | {t.samples} | {sum(t.statuses.values())} | {statuses} | {shapes} |"
        if reran:
            spread = (f"{statistics.median(t.gflops):.1f} ({min(t.gflops):.1f}-{max(t.gflops):.1f})" if t.gflops
                      else "-")
            line += f" {t.verified} | {t.respecting} | {spread} |"
        out.append(line)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="eval_dgemm_samples.jsonl files or folders holding one")
    ap.add_argument("--models", nargs="+", default=["rl"], help="models of the samples to read (default: rl)")
    ap.add_argument("--rerun", action="store_true",
                    help="benchmark the mismatched kernels again with NR written (VW * NV)")
    args = ap.parse_args(argv)
    tallies: dict[tuple[str, str], Tally] = {}
    try:
        for arg in args.reports:
            path = samples_file(arg)
            name = str(arg).rstrip("/")
            for model, tally in collect(path, args.models).items():
                tallies[(name, model)] = tally
        if args.rerun:
            rerun(list(tallies.values()))
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(rows(tallies, args.rerun)))
    total: dict[str, Any] = {"mismatched": sum(sum(t.statuses.values()) for t in tallies.values())}
    if args.rerun:
        total["verified with NR derived"] = sum(t.verified for t in tallies.values())
    print("; ".join(f"{k}: {v}" for k, v in total.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
