"""Why DGEMM samples failed, by cause: the failures that are one long-range inconsistency in a kernel's text, which
the generator can rule out by construction, counted apart from the rest.

Causes, first match wins:

- ``missing header``: a compile error that names a function or type of a standard header the kernel does not
  include (``memset`` without ``<string.h>``, ``malloc`` without ``<stdlib.h>``, ``__m256d`` without
  ``<immintrin.h>`` ...). A kernel's opening decides its headers before its body decides what it calls;
  ``prepare.dgemm.uniform_includes`` opens every kernel with the same headers.
- ``NR != VW x NV``: the kernel defines its tile width as a number other than ``VW * NV``
  (``benchmarks/tile_width.py``; ``prepare.dgemm.derived_nr``).
- ``plan not in corpus`` (with ``--corpus``): the completion's plan line is no corpus kernel's, or it has none
  (``data.dgemm.corpus.plan_openings``; ``rl_dgemm.plan_vocabulary`` holds plans to the corpus's).
- ``techniques not the plan's`` (with ``--corpus``): the plan is a corpus kernel's, but the techniques detected in
  the sample's code are not that kernel's (an OpenMP pragma in the body of a plan whose kernel has none, say): the
  code left the kernel its plan announced.
- otherwise the sample's status (``wrong_result``, ``compile_error``, ``format_violation`` ...).

With ``--corpus`` the column ``off-corpus plans`` counts every sample, verified or not, whose plan is no corpus
kernel's (with the plan vocabulary on it must be 0), and ``departs from plan`` every sample whose techniques are not
its plan's kernel's.

Each argument is an evaluation's samples file (``eval_dgemm_samples.jsonl``) or a folder holding one. One row per
(report, model): samples, failed samples, and the count per cause; a last row sums the reports per model.

Run: ``.venv/bin/python benchmarks/failed_samples.py experiments/dgemm/*-sft*-s*/ [--models rl sft]
[--corpus data/dgemm/corpus.jsonl]``
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.register_tiles import samples_file  # noqa: E402
from benchmarks.tile_width import kernel_source, width_mismatch  # noqa: E402
from hpcrl_core.algorithms.exploration import opening_plan_line  # noqa: E402
from hpcrl_core.data.dgemm.corpus import corpus_rows, plan_parameters, plan_text  # noqa: E402
from hpcrl_core.errors import DataError  # noqa: E402
from hpcrl_core.files import json_lines  # noqa: E402

MISSING_HEADER = "missing header"
NR_MISMATCH = "NR != VW x NV"
OFF_CORPUS = "plan not in corpus"
OFF_CORPUS_ALL = "off-corpus plans"
DEPARTS = "techniques not the plan's"
DEPARTS_ALL = "departs from plan"
# per plan line (newline included, no fence), the technique sets of the corpus kernels that have it
Plans = dict[str, set[frozenset[str]]]
# names the compiler reports as undeclared, and the standard header that declares them
_HEADER_OF = {**dict.fromkeys(("memset", "memcpy", "memmove", "strlen"), "string.h"),
              **dict.fromkeys(("malloc", "calloc", "free", "posix_memalign", "aligned_alloc", "abort"), "stdlib.h"),
              "size_t": "stddef.h"}
_UNDECLARED = re.compile(r"implicit declaration of function [‘'`](\w+)[’']|unknown type name [‘'`](\w+)[’']"
                         r"|[‘'`](\w+)[’'] undeclared")
_INCLUDED = re.compile(r"^[ \t]*#[ \t]*include[ \t]*<([^>]+)>", re.M)


def header_of(name: str) -> str | None:
    """The standard header that declares ``name``, or None when it is no header's (a misspelt local, say)."""
    if name in _HEADER_OF:
        return _HEADER_OF[name]
    if name.startswith(("_mm", "__m")):
        return "immintrin.h"
    if name.startswith("omp_"):
        return "omp.h"
    return None


def missing_header(code: str, detail: str) -> str | None:
    """The header a compile error shows missing: one that declares a name the compiler did not know and that the
    code does not include."""
    included = set(_INCLUDED.findall(code))
    for m in _UNDECLARED.finditer(detail):
        header = header_of(next(g for g in m.groups() if g))
        if header is not None and header not in included:
            return header
    return None


def off_corpus(completion: str, plans: Plans) -> bool:
    """Whether a completion's plan line (newline included) is none of ``plans``, or it opens without one."""
    line = opening_plan_line(completion)
    return line is None or line not in plans


def departs(row: dict, plans: Plans) -> bool:
    """Whether a sample whose plan is a corpus kernel's uses other techniques than every kernel with that plan (as
    detected in its code; a sample without detected techniques, or without code, never departs)."""
    line = opening_plan_line(str(row.get("completion", "")))
    techniques = row.get("techniques")
    if line not in plans or not isinstance(techniques, list) or row.get("status") == "format_violation":
        return False
    return frozenset(techniques) not in plans[line]


def corpus_plans(corpus: Path) -> Plans:
    """The plan lines of the corpus's kernels, without the code fence, each with its kernels' technique sets.

    Raises:
        DataError: the corpus is missing, or a line lacks a string ``kind`` or ``name`` or a list ``techniques``.
    """
    plans: Plans = {}
    for _, row in corpus_rows(corpus, {"kind": str, "name": str, "techniques": list}):
        line = plan_text(row["kind"], plan_parameters(row["name"]))
        plans.setdefault(line, set()).add(frozenset(row["techniques"]))
    return plans


def cause(row: dict, plans: Plans | None = None) -> str | None:
    """A failed sample's cause (see the module docstring), or None for a verified one; ``plans`` (the corpus's)
    turns on the off-corpus cause."""
    status = str(row.get("status"))
    if status == "ok":
        return None
    completion = str(row.get("completion", ""))
    code = kernel_source(completion)
    if status == "compile_error" and missing_header(code, str(row.get("detail", ""))):
        return MISSING_HEADER
    if width_mismatch(code) is not None:
        return NR_MISMATCH
    if plans is not None and off_corpus(completion, plans):
        return OFF_CORPUS
    if plans is not None and departs(row, plans):
        return DEPARTS
    return status


def collect(path: Path, models: Sequence[str], plans: Plans | None = None) -> dict[str, Counter[str]]:
    """Per model: ``samples``, ``failed`` and the count per cause; with ``plans`` also ``off-corpus plans`` and
    ``departs from plan`` over every sample.

    Raises:
        DataError: a sample without a status or completion.
    """
    out = {m: Counter[str]() for m in models}
    for line, row in json_lines(path):
        model = str(row.get("model", "?"))
        if model not in out:
            continue
        if not isinstance(row.get("status"), str) or not isinstance(row.get("completion"), str):
            raise DataError(f"{path}:{line}: a sample without a completion or status")
        out[model]["samples"] += 1
        if plans is not None:
            out[model][OFF_CORPUS_ALL] += off_corpus(row["completion"], plans)
            out[model][DEPARTS_ALL] += departs(row, plans)
        why = cause(row, plans)
        if why is not None:
            out[model]["failed"] += 1
            out[model][why] += 1
    return out


def rows(tallies: dict[tuple[str, str], Counter[str]], with_plans: bool = False) -> list[str]:
    fixed = ("samples", "failed", MISSING_HEADER, NR_MISMATCH) + (
        (OFF_CORPUS, OFF_CORPUS_ALL, DEPARTS, DEPARTS_ALL) if with_plans else ())
    rest = sorted({k for t in tallies.values() for k in t} - set(fixed))
    out = ["| report | model | " + " | ".join(fixed + tuple(rest)) + " |",
           "|---|---|" + "---:|" * (len(fixed) + len(rest))]
    totals: dict[str, Counter[str]] = {}
    for (report, model), t in tallies.items():
        totals.setdefault(model, Counter()).update(t)
        out.append(f"| {report} | {model} | " + " | ".join(str(t[k]) for k in fixed + tuple(rest)) + " |")
    if len(tallies) > len(totals):
        for model, t in totals.items():
            out.append(f"| all | {model} | " + " | ".join(str(t[k]) for k in fixed + tuple(rest)) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path, help="eval_dgemm_samples.jsonl files or folders holding one")
    ap.add_argument("--models", nargs="+", default=["rl"], help="models of the samples to read (default: rl)")
    ap.add_argument("--corpus", type=Path, help="data/dgemm/corpus.jsonl: count plans that are no corpus kernel's "
                    "and samples whose techniques are not their plan's kernel's")
    args = ap.parse_args(argv)
    tallies: dict[tuple[str, str], Counter[str]] = {}
    try:
        plans = corpus_plans(args.corpus) if args.corpus else None
        for arg in args.reports:
            for model, tally in collect(samples_file(arg), args.models, plans).items():
                tallies[(str(arg).rstrip("/"), model)] = tally
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(rows(tallies, plans is not None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
