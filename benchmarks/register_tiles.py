"""GFLOPS of packed DGEMM kernels by the shape of their vector register tile, from evaluation samples: whether the
tiles a policy writes fit the node's vector registers, and what a tile that does not fit costs. Vector tiles
(``tile_vec``'s array form) count too, in rows of their own.

Each argument is an evaluation's samples file (``eval_dgemm_samples.jsonl``) or a folder holding one
(``benchmarks/experiments_dgemm.py``'s run folders, ``reports/``). Every verified sample whose code defines the
register tile's constants ``VW`` (doubles per vector), ``MR`` and ``NV`` (vectors per tile row) and declares a
vector type (GCC ``vector_size`` or ``__m256d``/``__m512d``: scalar packed kernels have no register tile) counts. One
row per (kind, VW, MR, NV), the kind from the sample's ``// plan: <kind>:`` line (a plan can name another shape
than the body defines; the body decides the speed): the registers the rank-1 update
holds live (``kinds.packed.tile_registers``: MR x NV accumulators, NV vectors of B, one broadcast of A), whether
that fits the registers of this node (``bench.node.vector_registers``, or ``--registers``), the samples per model,
and the median, 10th and 90th percentile GFLOPS over them. The samples were timed at their problems' sizes; compare
rows of one set of reports, taken on one node.

Run: ``.venv/bin/python benchmarks/register_tiles.py experiments/dgemm/*-sft*-s*/ [--registers 16]``
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hpcrl_core.bench.node import vector_registers  # noqa: E402
from hpcrl_core.data.dgemm.kinds.packed import tile_registers  # noqa: E402
from hpcrl_core.errors import DataError  # noqa: E402
from hpcrl_core.evaluation.report import samples_path_for  # noqa: E402
from hpcrl_core.files import json_lines  # noqa: E402

_CONST = {name: re.compile(rf"^\s*#\s*define\s+{name}\s+(\d+)\s*$", re.M) for name in ("VW", "MR", "NV")}
_VECTOR = re.compile(r"vector_size|__m256d|__m512d")
_PLAN = re.compile(r"//\s*plan:\s*([A-Za-z_]+)")
Shape = tuple[str, int, int, int]  # (kind, VW, MR, NV)


def samples_file(arg: Path) -> Path:
    """The samples file an argument names: the file itself, or the one beside the folder's ``eval_dgemm.json``
    (``evaluation.report.samples_path_for``)."""
    path = samples_path_for(arg / "eval_dgemm.json") if arg.is_dir() else arg
    if not path.is_file():
        raise DataError(f"{arg}: no {path.name} there")
    return path


def tile_shape(code: str) -> Shape | None:
    """(plan kind, VW, MR, NV) of a vector kernel, or None when it declares no vector type or does not define all
    three constants as positive integers."""
    found = [pattern.search(code) for pattern in _CONST.values()]
    if not all(found) or not _VECTOR.search(code):
        return None
    vw, mr, nv = (int(m.group(1)) for m in found if m)
    plan = _PLAN.search(code)
    return (plan.group(1) if plan else "-", vw, mr, nv) if vw > 0 and mr > 0 and nv > 0 else None


def collect(paths: Sequence[Path]) -> tuple[dict[Shape, list[float]], dict[Shape, Counter[str]]]:
    """Verified samples' GFLOPS per tile shape, and per shape how many samples each model wrote."""
    gflops: dict[Shape, list[float]] = defaultdict(list)
    models: dict[Shape, Counter[str]] = defaultdict(Counter)
    for path in paths:
        for line, row in json_lines(path):
            if row.get("status") != "ok":
                continue
            value = row.get("gflops")
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise DataError(f"{path}:{line}: a verified sample without a GFLOPS figure")
            shape = tile_shape(str(row.get("completion", "")))
            if shape is not None:
                gflops[shape].append(float(value))
                models[shape][str(row.get("model", "?"))] += 1
    return gflops, models


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(gflops: dict[Shape, list[float]], models: dict[Shape, Counter[str]], registers: int | None) -> list[str]:
    """Markdown rows, one per shape, in (kind, VW, registers held, MR) order."""
    out = ["| plan kind | VW | MR x NV | registers held | fits | samples | median GFLOPS | p10 | p90 |",
           "|---|---:|---|---:|---|---|---:|---:|---:|"]
    for shape in sorted(gflops, key=lambda s: (s[0], s[1], tile_registers(s[2], s[3]), s[2])):
        kind, vw, mr, nv = shape
        held = tile_registers(mr, nv)
        room = registers if registers is not None else vector_registers(vw)
        values = gflops[shape]
        per_model = ", ".join(f"{m} {n}" for m, n in sorted(models[shape].items()))
        out.append(f"| {kind} | {vw} | {mr} x {nv} | {held} | {'yes' if held <= room else f'no ({room})'} | "
                   f"{per_model} | "
                   f"{statistics.median(values):.1f} | {_quantile(values, 0.1):.1f} | {_quantile(values, 0.9):.1f} |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="eval_dgemm_samples.jsonl files or folders holding one")
    ap.add_argument("--registers", type=int, default=None,
                    help="vector registers to judge fit against (default: this node's, per vector width)")
    args = ap.parse_args(argv)
    if args.registers is not None and args.registers < 1:
        ap.error(f"--registers must be >= 1, got {args.registers}")
    try:
        gflops, models = collect([samples_file(p) for p in args.reports])
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not gflops:
        print("no verified sample is a vector kernel defining VW, MR and NV")
        return 0
    print("\n".join(table(gflops, models, args.registers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
