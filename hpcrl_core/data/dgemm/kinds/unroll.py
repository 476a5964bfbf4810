"""DGEMM variant kinds with register blocking in plain C (no vector types): scalar register tiles and unrolled
i-k-j kernels.

- ``tile_scalar``: MR x NR named scalar accumulators, k innermost (register_blocking only), edges by a dot
  helper. ~1.5-12 GFLOPS at n = 256.
- ``ikj_unrolled``: i-k-j with k unrolled by 2/4 (several B rows per C pass) or i unrolled by 2/4 (several C rows
  per B row): loop_reorder + register_blocking, ~5-30 GFLOPS.
Both take optional OpenMP on the row loop and ``omp simd`` on the innermost loop.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""

from __future__ import annotations

import random

from hpcrl_core.bench.techniques import Technique
from hpcrl_core.data.dgemm.kinds.style import (
    Draft,
    Style,
    block,
    coff,
    decls,
    includes,
    lead,
    omp_for,
    pline,
    render,
    roff,
    zero_row,
)

T = Technique


def dot_helper(s: Style, name: str) -> str:
    """``static double name(n, a, B, j)``: row a of A times column j of B (edges of register tiles)."""
    k = s.k
    return (f"static double {name}(int n, const double *a, const double *B, int j)\n{{\n    double r = 0.0;\n"
            f"    for (int {k} = 0; {k} < n; {k}++)\n        r += a[{k}] * {s.at('B', k, 'j')};\n"
            "    return r;\n}\n\n")


def _tile_body(s: Style, mr: int, nr: int, simd: bool) -> str:
    i, j, k = s.i, s.j, s.k
    accs = [f"c{r}{c}" for r in range(mr) for c in range(nr)]
    a_decl = decls(f"{s.cq}double", [f"a{r} = {s.at('A', roff(i, r), k)}" for r in range(mr)])
    b_decl = decls(f"{s.cq}double", [f"b{c} = {s.at('B', k, coff(j, c))}" for c in range(nr)])
    zero = "\n".join("double " + ", ".join(f"c{r}{c} = 0.0" for c in range(nr)) + ";" for r in range(mr))
    fmas = "\n".join("    " + " ".join(f"c{r}{c} += a{r} * b{c};" for c in range(nr)) for r in range(mr))
    stores = "\n".join(f"{s.at('C', roff(i, r), coff(j, c))} = c{r}{c};" for r in range(mr) for c in range(nr))
    simd_line = f"#pragma omp simd reduction(+:{', '.join(accs)})\n" if simd else ""
    return (f"{zero}\n{simd_line}for (int {k} = 0; {k} < n; {k}++) {{\n"
            f"{block(a_decl, 1)}\n{block(b_decl, 1)}\n{fmas}\n}}\n{stores}")


def tile_scalar(rng: random.Random, s: Style) -> Draft:
    """An MR x NR tile of C accumulated in scalars over the whole k range; leftover rows/columns by dot products."""
    i, j = s.i, s.j
    mr, nr = rng.choice(((2, 2), (2, 2), (2, 4), (4, 2), (4, 4), (1, 4), (3, 3)))
    omp, simd = rng.random() < 0.35, rng.random() < 0.15
    dot = s.dot
    edge_cols = "\n".join(f"{s.at('C', roff(i, r), j)} = {dot}(n, {s.row('A', roff(i, r))}, B, {j});"
                          for r in range(mr))
    jloops = (f"for (int {j} = 0; {j} < nfull; {j} += {nr}) {{\n{block(_tile_body(s, mr, nr, simd), 1)}\n}}\n"
              f"//# leftover columns of this row band\nfor (int {j} = nfull; {j} < n; {j}++) {{\n"
              f"{block(edge_cols, 1)}\n}}")
    body = (f"const int mfull = n - n % {mr};\nconst int nfull = n - n % {nr};\n"
            f"//# {mr}x{nr} register tile: {mr * nr} accumulators stay in registers over the k loop\n"
            f"{lead(omp_for(s, rng) if omp else '')}for (int {i} = 0; {i} < mfull; {i} += {mr}) {{\n"
            f"{block(jloops, 1)}\n}}\n//# leftover rows\nfor (int {i} = mfull; {i} < n; {i}++)\n"
            f"    for (int {j} = 0; {j} < n; {j}++)\n        {s.at('C', i, j)} = {dot}(n, {s.row('A', i)}, B, {j});")
    code = f"{includes('stddef.h')}{dot_helper(s, dot)}{s.signature}\n{{\n{block(body, 1)}\n}}"
    intended = {T.REGISTER_BLOCKING} | ({T.OPENMP} if omp else set()) | ({T.SIMD} if simd else set())
    desc = f"tile{mr}x{nr}{'-omp' if omp else ''}{'-simd' if simd else ''}"
    return Draft(desc, render(code, s, f"C = A * B with a {mr}x{nr} scalar register tile"), frozenset(intended))


def _kunrolled_row(s: Style, u: int, simd: bool) -> str:
    """One row of C (pointer ``s.crow``) updated with ``u`` rows of B per pass over it, then the leftover k."""
    i, j, k = s.i, s.j, s.k
    a_decl = decls(f"{s.cq}double", [f"a{r} = {s.at('A', i, coff(k, r))}" for r in range(u)])
    b_decl = decls("const double", [f"*b{r} = {s.row('B', roff(k, r))}" for r in range(u)])
    upd = " + ".join(f"a{r} * b{r}[{j}]" for r in range(u))
    pragma = "#pragma omp simd" if simd else ""
    return (f"int {k} = 0;\n//# {u} rows of B per pass over the C row: fewer loads and stores of C\n"
            f"for (; {k} + {u - 1} < n; {k} += {u}) {{\n{block(a_decl, 1)}\n{block(b_decl, 1)}\n"
            f"{pline(pragma, 1)}    for (int {j} = 0; {j} < n; {j}++)\n        {s.crow}[{j}] += {upd};\n}}\n"
            f"for (; {k} < n; {k}++) {{\n    {s.cq}double a0 = {s.at('A', i, k)};\n"
            f"    const double *b0 = {s.row('B', k)};\n{pline(pragma, 1)}    for (int {j} = 0; {j} < n; {j}++)\n"
            f"        {s.crow}[{j}] += a0 * b0[{j}];\n}}")


def _iunrolled_rows(s: Style, u: int, simd: bool) -> str:
    """``u`` rows of C starting at row i, each updated from the same row of B."""
    i, j, k = s.i, s.j, s.k
    rows = decls("double", [f"*c{r} = {s.row('C', roff(i, r))}" for r in range(u)])
    a_decl = decls(f"{s.cq}double", [f"a{r} = {s.at('A', roff(i, r), k)}" for r in range(u)])
    upd = "\n".join(f"        c{r}[{j}] += a{r} * bj;" for r in range(u))
    pragma = "#pragma omp simd" if simd else ""
    return (f"{rows}\nmemset(c0, 0, (size_t){u} * n * sizeof(double));\n"
            f"for (int {k} = 0; {k} < n; {k}++) {{\n{block(a_decl, 1)}\n"
            f"    const double *b = {s.row('B', k)};\n{pline(pragma, 1)}    for (int {j} = 0; {j} < n; {j}++) {{\n"
            f"        {s.cq}double bj = b[{j}];\n{upd}\n    }}\n}}")


def _plain_row(s: Style, rng: random.Random) -> str:
    i, j, k = s.i, s.j, s.k
    return (f"double *{s.crow} = {s.row('C', i)};\n{zero_row(s, s.crow, rng)}\nfor (int {k} = 0; {k} < n; {k}++)\n"
            f"    for (int {j} = 0; {j} < n; {j}++)\n        {s.crow}[{j}] += {s.at('A', i, k)} * {s.at('B', k, j)};")


def ikj_unrolled(rng: random.Random, s: Style) -> Draft:
    """i-k-j with k or i unrolled by 2 or 4 (explicit, several named operands per pass)."""
    i = s.i
    which, u = rng.choice(("k", "i")), rng.choice((2, 2, 4))
    omp, simd = rng.random() < 0.35, rng.random() < 0.3
    pragma = lead(omp_for(s, rng) if omp else "")
    if which == "k":
        row = f"double *{s.crow} = {s.row('C', i)};\n{zero_row(s, s.crow, rng)}\n{_kunrolled_row(s, u, simd)}"
        body = f"{pragma}for (int {i} = 0; {i} < n; {i}++) {{\n{block(row, 1)}\n}}"
    else:
        body = (f"const int mfull = n - n % {u};\n{pragma}for (int {i} = 0; {i} < mfull; {i} += {u}) {{\n"
                f"{block(_iunrolled_rows(s, u, simd), 1)}\n}}\n//# leftover rows, one at a time\n"
                f"for (int {i} = mfull; {i} < n; {i}++) {{\n{block(_plain_row(s, rng), 1)}\n}}")
    code = f"{includes('string.h')}{s.signature}\n{{\n{block(body, 1)}\n}}"
    intended = {T.LOOP_REORDER, T.REGISTER_BLOCKING} | ({T.OPENMP} if omp else set()) | ({T.SIMD} if simd else set())
    desc = f"ikj-{which}x{u}{'-omp' if omp else ''}{'-simd' if simd else ''}"
    header = f"C = A * B, i-k-j order with {which} unrolled by {u}"
    return Draft(desc, render(code, s, header), frozenset(intended))
