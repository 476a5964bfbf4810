"""DGEMM variant kinds without tiling: the textbook kernel and loop reorderings.

- ``naive``: i-j-k or j-i-k with a scalar accumulator (k innermost, no technique), optionally on a transposed copy
  of B, with ``omp simd`` reductions, ``GCC unroll``, partial sums (k unrolled by 2 or 4) or OpenMP.
  ~0.5-5 GFLOPS at n = 256 (one core).
- ``reorder``: i-k-j and k-i-j (unit stride, ~5-25 GFLOPS) and j-k-i, k-j-i (column walks, ~0.2-1), with
  optional OpenMP, ``omp simd`` and ``GCC unroll``.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""

from __future__ import annotations

import random

from hpcrl_core.bench.techniques import Technique
from hpcrl_core.config.prepare import NAIVE_TRANSPOSED
from hpcrl_core.data.dgemm.kinds.style import (
    Draft,
    Style,
    block,
    includes,
    lead,
    omp_for,
    render,
    unroll,
    zero_matrix,
    zero_row,
)

T = Technique


def _naive_kloop(s: Style, rng: random.Random, kind: str, bcol: str) -> str:
    """The k loop of one C element, accumulating into ``s.acc``; ``bcol`` is the B matrix walked (B or Bt)."""
    i, j, k, acc = s.i, s.j, s.k, s.acc

    def b(kx: str) -> str:
        return s.at("Bt", j, kx) if bcol == "Bt" else s.at("B", kx, j)

    if kind in ("plain", "simd", "unroll"):
        pragma = {"plain": "", "simd": f"#pragma omp simd reduction(+:{acc})\n", "unroll": unroll(rng) + "\n"}[kind]
        return (f"double {acc} = 0.0;\n{pragma}for (int {k} = 0; {k} < n; {k}++)\n"
                f"    {acc} += {s.at('A', i, k)} * {b(k)};\n{s.at('C', i, j)} = {acc};")
    u = rng.choice((2, 4))
    parts = [f"{acc}{r}" for r in range(u)]
    body = "\n".join(f"    {p} += {s.at('A', i, f'{k} + {r}' if r else k)} * {b(f'({k} + {r})' if r else k)};"
                     for r, p in enumerate(parts))
    total = " + ".join(parts) if u == 2 else f"({parts[0]} + {parts[1]}) + ({parts[2]} + {parts[3]})"
    return (f"double {' = 0.0, '.join(parts)} = 0.0;\nint {k} = 0;\n//# {u} partial sums: independent add chains\n"
            f"for (; {k} + {u - 1} < n; {k} += {u}) {{\n{body}\n}}\nfor (; {k} < n; {k}++)\n"
            f"    {parts[0]} += {s.at('A', i, k)} * {b(k)};\n{s.at('C', i, j)} = {total};")


def _naive_nest(s: Style, rng: random.Random, order: str, kind: str, omp: str, bcol: str) -> str:
    outer, inner = (s.i, s.j) if order == "ijk" else (s.j, s.i)
    pragma = {"": "", "for": omp_for(s, rng) + "\n", "collapse": omp_for(s, rng, " collapse(2)") + "\n"}[omp]
    return (f"{pragma}for (int {outer} = 0; {outer} < n; {outer}++) {{\n"
            f"    for (int {inner} = 0; {inner} < n; {inner}++) {{\n"
            f"{block(_naive_kloop(s, rng, kind, bcol), 2)}\n    }}\n}}")


def naive(rng: random.Random, s: Style, transposed_share: float = NAIVE_TRANSPOSED) -> Draft:
    """Textbook kernel: k innermost with a scalar accumulator, never reordered; B is transposed first in
    ``transposed_share`` of the draws (the same random stream whatever the share)."""
    order = rng.choice(("ijk", "ijk", "jik"))
    kind = rng.choice(("plain", "plain", "plain", "simd", "unroll", "partial"))
    omp = rng.choice(("", "", "", "for", "collapse"))  # plain and unthreaded often: stage-0 problems need them
    transposed = rng.random() < transposed_share
    nest = _naive_nest(s, rng, order, kind, omp, "Bt" if transposed else "B")
    if transposed:
        j, k = s.j, s.k
        fallback = _naive_nest(s, rng, "ijk", "plain", "", "B")
        tpragma = omp_for(s, rng) + "\n" if omp else ""
        body = (f"double *Bt = malloc((size_t)n * n * sizeof(double));\nif (Bt == NULL) {{\n"
                f"{block(fallback, 1)}\n    return;\n}}\n//# transpose B so the k loop reads both operands "
                f"with unit stride\n{tpragma}for (int {k} = 0; {k} < n; {k}++)\n"
                f"    for (int {j} = 0; {j} < n; {j}++)\n        {s.at('Bt', j, k)} = {s.at('B', k, j)};\n"
                f"{nest}\nfree(Bt);")
        head = includes("stdlib.h")
    else:
        body, head = nest, includes("stddef.h") if s.index == "cast" else ""
    intended = {T.OPENMP} if omp else set()
    intended |= {"simd": {T.SIMD}, "unroll": {T.REGISTER_BLOCKING}, "partial": {T.REGISTER_BLOCKING}}.get(kind, set())
    code = f"{head}{s.signature}\n{{\n{block(body, 1)}\n}}"
    desc = f"{order}{'-bt' if transposed else ''}-{kind}{'-omp' if omp else ''}"
    return Draft(desc, render(code, s, f"C = A * B, {order} order with a scalar accumulator"), frozenset(intended))


def _inner_pragmas(rng: random.Random, simd: bool, unr: bool) -> tuple[str, str]:
    """(pragma before the middle loop, pragma before the innermost one): GCC unroll and omp simd never share one."""
    inner = "#pragma omp simd" if simd else (unroll(rng) if unr else "")
    middle = unroll(rng) if simd and unr else ""
    return middle, inner


def _ikj(s: Style, rng: random.Random, omp: bool, simd: bool, unr: bool) -> str:
    i, j, k, a = s.i, s.j, s.k, s.aval
    middle, inner = _inner_pragmas(rng, simd, unr)
    per_row = rng.random() < 0.6
    crow = s.crow if s.rowptr else f"({s.row('C', i)})"
    cj = f"{s.crow}[{j}]" if s.rowptr else s.at("C", i, j)
    bj = f"{s.brow}[{j}]" if s.rowptr else s.at("B", k, j)
    head = f"double *{s.crow} = {s.row('C', i)};\n" if s.rowptr else ""
    if per_row:
        head += "//# C arrives holding garbage: clear this row first\n" + zero_row(s, crow, rng) + "\n"
    bdecl = f"const double *{s.brow} = {s.row('B', k)};\n" if s.rowptr else ""
    kbody = (f"{s.cq}double {a} = {s.at('A', i, k)};\n{bdecl}{lead(inner)}for (int {j} = 0; {j} < n; {j}++)\n"
             f"    {cj} += {a} * {bj};")
    ibody = f"{head}{lead(middle)}for (int {k} = 0; {k} < n; {k}++) {{\n{block(kbody, 1)}\n}}"
    nest = f"{lead(omp_for(s, rng) if omp else '')}for (int {i} = 0; {i} < n; {i}++) {{\n{block(ibody, 1)}\n}}"
    return nest if per_row else f"{zero_matrix(s, rng)}\n{nest}"


def _kij(s: Style, rng: random.Random, omp: bool, simd: bool, unr: bool) -> str:
    i, j, k, a = s.i, s.j, s.k, s.aval
    middle, inner = _inner_pragmas(rng, simd, unr)
    bdecl = f"const double *{s.brow} = {s.row('B', k)};\n" if s.rowptr else ""
    bj = f"{s.brow}[{j}]" if s.rowptr else s.at("B", k, j)
    ibody = (f"{s.cq}double {a} = {s.at('A', i, k)};\n{lead(inner)}for (int {j} = 0; {j} < n; {j}++)\n"
             f"    {s.at('C', i, j)} += {a} * {bj};")
    kbody = (f"{bdecl}{lead('#pragma omp for schedule(static)' if omp else middle)}"
             f"for (int {i} = 0; {i} < n; {i}++) {{\n{block(ibody, 1)}\n}}")
    return (f"{zero_matrix(s, rng)}\n{lead('#pragma omp parallel' if omp else '')}for (int {k} = 0; {k} < n; {k}++) "
            f"{{\n{block(kbody, 1)}\n}}")


def _column_walk(s: Style, rng: random.Random, order: str, omp: bool, simd: bool, unr: bool) -> str:
    """j-k-i or k-j-i: i innermost, so C and A are walked down a column (stride n): slow, but reordered."""
    i, j, k = s.i, s.j, s.k
    middle, inner = _inner_pragmas(rng, simd, unr)
    update = (f"{s.cq}double b = {s.at('B', k, j)};\n{lead(inner)}for (int {i} = 0; {i} < n; {i}++)\n"
              f"    {s.at('C', i, j)} += {s.at('A', i, k)} * b;")
    if order == "jki":
        mid = f"{lead(middle)}for (int {k} = 0; {k} < n; {k}++) {{\n{block(update, 1)}\n}}"
        outer = f"{lead(omp_for(s, rng) if omp else '')}for (int {j} = 0; {j} < n; {j}++) {{\n{block(mid, 1)}\n}}"
    else:
        mid = (f"{lead('#pragma omp for' if omp else middle)}for (int {j} = 0; {j} < n; {j}++) "
               f"{{\n{block(update, 1)}\n}}")
        outer = (f"{lead('#pragma omp parallel' if omp else '')}for (int {k} = 0; {k} < n; {k}++) "
                 f"{{\n{block(mid, 1)}\n}}")
    return f"{zero_matrix(s, rng)}\n{outer}"


def reorder(rng: random.Random, s: Style) -> Draft:
    """Loop orders with the reduction index k outside the innermost loop."""
    order = rng.choice(("ikj", "ikj", "ikj", "kij", "kij", "jki", "kji"))
    omp, simd, unr = rng.random() < 0.35, rng.random() < 0.3, rng.random() < 0.25
    unr = unr and not (omp and simd and order != "ikj" and order != "jki")  # omp for owns the middle loop
    if order == "ikj":
        body = _ikj(s, rng, omp, simd, unr)
    elif order == "kij":
        body = _kij(s, rng, omp, simd, unr)
    else:
        body = _column_walk(s, rng, order, omp, simd, unr)
    intended = {T.LOOP_REORDER} | ({T.OPENMP} if omp else set()) | ({T.SIMD} if simd else set())
    intended |= {T.REGISTER_BLOCKING} if unr else set()
    heads = ["string.h"] if "memset" in body else []
    heads += ["stddef.h"] if "size_t" in body and not heads else []
    code = f"{includes(*heads)}{s.signature}\n{{\n{block(body, 1)}\n}}"
    flags = "".join(f"-{f}" for f, on in (("omp", omp), ("simd", simd), ("unroll", unr)) if on)
    header = f"C = A * B in {order} order: k is not the innermost loop"
    return Draft(f"{order}{flags}", render(code, s, header), frozenset(intended))
