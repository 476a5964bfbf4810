"""GFLOPS of packed DGEMM kernels by the shape of their vector register tile and their k unrolling, from evaluation
samples and, with ``--data``, from the corpus timed now: whether the tiles a policy writes fit the node's vector
registers, what a tile that does not fit costs, and which unrolling the fast shapes need. Vector tiles (``tile_vec``'s
array form) count too, in rows of their own.

Each argument is an evaluation's samples file (``eval_dgemm_samples.jsonl``) or a folder holding one
(``benchmarks/experiments_dgemm.py``'s run folders, ``reports/``). Every verified sample whose code defines the
register tile's constants ``VW`` (doubles per vector), ``MR`` and ``NV`` (vectors per tile row) and declares a
vector type (GCC ``vector_size`` or ``__m256d``/``__m512d``: scalar packed kernels have no register tile) counts. One
row per (kind, VW, MR, NV, k unroll), the kind from the sample's ``// plan: <kind>:`` line (a plan can name another
shape than the body defines; the body decides the speed), the unroll from the body's unrolled k loop (``for (; k + 1 <
kc; k += 2)``: 2 rank-1 updates per iteration; 1 without such a loop): the registers the rank-1 update
holds live (``kinds.packed.tile_registers``: MR x NV accumulators, NV vectors of B, one broadcast of A), whether
that fits the registers of this node (``bench.node.vector_registers``, or ``--registers``), the samples per model,
and the median, 10th and 90th percentile GFLOPS over them. The samples were timed at their problems' sizes; compare
rows of one set of reports, taken on one node.

``--data <data dir>`` adds the corpus (``<data>/dgemm/corpus.jsonl``, kind from each kernel's name) as model
``corpus``: every kernel timed now at every size of the held-out problems (``problems_eval.jsonl``), as the evaluation
times its oracle (``evaluate_dgemm``'s backend and result cache: kernels the evaluation already timed on this node come
from the cache), one sample per (kernel, size).

Run: ``.venv/bin/python benchmarks/register_tiles.py experiments/dgemm/*-sft*-s*/ [--data data] [--registers 16]``
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

_VECTOR = re.compile(r"vector_size|__m256d|__m512d")
_PLAN = re.compile(r"//\s*plan:\s*([A-Za-z_]+)")
# the generator's unrolled k loop, ``for (; k + 3 < kc; k += 4)``: the step when it is the bound's offset plus one
_UNROLLED = re.compile(r"for\s*\(\s*;\s*(\w+)\s*\+\s*(\d+)\s*<\s*\w+\s*;\s*\1\s*\+=\s*(\d+)\s*\)")
Shape = tuple[str, int, int, int, int]  # (kind, VW, MR, NV, k unroll)


def samples_file(arg: Path) -> Path:
    """The samples file an argument names: the file itself, or the one beside the folder's ``eval_dgemm.json``
    (``evaluation.report.samples_path_for``)."""
    path = samples_path_for(arg / "eval_dgemm.json") if arg.is_dir() else arg
    if not path.is_file():
        raise DataError(f"{arg}: no {path.name} there")
    return path


def k_unroll(code: str) -> int:
    """Rank-1 updates per iteration of the kernel's unrolled k loop (its first loop ``for (; k + u-1 < kc; k += u)``),
    1 when it has none."""
    for m in _UNROLLED.finditer(code):
        if int(m.group(3)) == int(m.group(2)) + 1:
            return int(m.group(3))
    return 1


def integer_define(name: str) -> re.Pattern[str]:
    """A line ``#define <name> <integer>``, the integer its group 1."""
    return re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{name}[ \t]+(\d+)[ \t]*$", re.M)


def integer_defines(code: str, names: Sequence[str]) -> list[int] | None:
    """The values of ``#define <name> <integer>`` for each of ``names``, in order; None when one is not so defined."""
    found = [integer_define(name).search(code) for name in names]
    return [int(m.group(1)) for m in found if m] if all(found) else None


def tile_shape(code: str, kind: str | None = None) -> Shape | None:
    """(kind, VW, MR, NV, k unroll) of a vector kernel, or None when it declares no vector type or does not define
    all three constants as positive integers. The kind is ``kind`` or, without it, the one the plan line names."""
    values = integer_defines(code, ("VW", "MR", "NV"))
    if values is None or not _VECTOR.search(code):
        return None
    vw, mr, nv = values
    plan = _PLAN.search(code)
    if kind is None:
        kind = plan.group(1) if plan else "-"
    return (kind, vw, mr, nv, k_unroll(code)) if vw > 0 and mr > 0 and nv > 0 else None


Tally = tuple[dict[Shape, list[float]], dict[Shape, Counter[str]]]


def collect(paths: Sequence[Path]) -> Tally:
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


def time_corpus_tiles(data: Path, tally: Tally) -> None:
    """Add the corpus's vector kernels to ``tally`` as model ``corpus``: each timed now at every held-out size with
    the evaluation's backend.

    Raises:
        DataError: the corpus or the held-out problems are missing.
    """
    from hpcrl_core.evaluation.oracle import read_corpus, time_corpus

    corpus = read_corpus(data)
    if corpus is None:
        raise DataError(f"{data}: no dgemm/corpus.jsonl there; run `dvc repro prepare`")
    from hpcrl_core.config import Settings, load_params  # the evaluation's imports take seconds: after the checks
    from hpcrl_core.evaluation.dgemm import eval_problems, evaluation_executor, problem_sizes
    shaped = [(e, shape) for e in corpus
              if (shape := tile_shape(e.code, kind=e.name.split(":")[1] if e.name.count(":") >= 2 else "-"))]
    sizes = sorted(set(problem_sizes(eval_problems(data, 10**9))))
    params = load_params(ROOT / "params.yaml")
    with evaluation_executor(params, Settings()) as ex:
        results = time_corpus(ex, [e for e, _ in shaped], sizes,
                              progress=lambda line: print(line, file=sys.stderr, flush=True))
    gflops, models = tally
    for n in sizes:
        for (_, shape), result in zip(shaped, results[n], strict=True):
            if result.ok and result.gflops is not None:
                gflops[shape].append(float(result.gflops))
                models[shape]["corpus"] += 1


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def table(gflops: dict[Shape, list[float]], models: dict[Shape, Counter[str]], registers: int | None) -> list[str]:
    """Markdown rows, one per shape, in (kind, VW, registers held, MR) order."""
    out = ["| plan kind | VW | MR x NV | k unroll | registers held | fits | samples | median GFLOPS | p10 | p90 |",
           "|---|---:|---|---:|---:|---|---|---:|---:|---:|"]
    for shape in sorted(gflops, key=lambda s: (s[0], s[1], tile_registers(s[2], s[3]), s[2], s[4])):
        kind, vw, mr, nv, unroll = shape
        held = tile_registers(mr, nv)
        room = registers if registers is not None else vector_registers(vw)
        values = gflops[shape]
        per_model = ", ".join(f"{m} {n}" for m, n in sorted(models[shape].items()))
        fits = "yes" if held <= room else f"no ({room})"
        out.append(f"| {kind} | {vw} | {mr} x {nv} | {unroll} | {held} | {fits} | {per_model} | "
                   f"{statistics.median(values):.1f} | {_quantile(values, 0.1):.1f} | {_quantile(values, 0.9):.1f} |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="*", type=Path, help="eval_dgemm_samples.jsonl files or folders holding one")
    ap.add_argument("--data", type=Path, default=None,
                    help="a data folder: time its corpus's vector kernels now at the held-out sizes (model 'corpus')")
    ap.add_argument("--registers", type=int, default=None,
                    help="vector registers to judge fit against (default: this node's, per vector width)")
    args = ap.parse_args(argv)
    if args.registers is not None and args.registers < 1:
        ap.error(f"--registers must be >= 1, got {args.registers}")
    if not args.reports and args.data is None:
        ap.error("name evaluation reports, --data, or both")
    try:
        gflops, models = collect([samples_file(p) for p in args.reports])
        if args.data is not None:
            time_corpus_tiles(args.data, (gflops, models))
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
