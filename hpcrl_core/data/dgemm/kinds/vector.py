"""DGEMM variant kinds with explicit vector code, unpacked: x86 intrinsics or GCC vector extensions, 4 (AVX2)
or 8 (AVX-512) doubles per vector.

- ``ikj_vec``: i-k-j with the j loop in vectors (one or two per step), scalar tail: loop_reorder + simd
  (+ register_blocking with two vectors per step). ~4-20 GFLOPS at n = 256.
- ``tile_vec``: an MR x (NV vectors) register tile of C over the k range, in named vector accumulators or (half the
  time) an accumulator array with loops over the tile (+ loop_reorder), optionally
  k-blocked (cache_blocking) and threaded over row bands; edges by dot products: register_blocking + simd.
  ~5-60 GFLOPS.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hpcrl_core.bench.node import vector_doubles
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
    render,
    roff,
    zero_matrix,
)
from hpcrl_core.data.dgemm.kinds.unroll import dot_helper

T = Technique


@dataclass(frozen=True)
class Vec:
    """Spelling of vector operations. ``impl``: intrin | ext (aliasing unaligned type) | extmem (memcpy helpers)."""

    w: int
    impl: str

    @property
    def t(self) -> str:
        return {4: "__m256d", 8: "__m512d"}[self.w] if self.impl == "intrin" else f"v{self.w}d"

    @property
    def _p(self) -> str:
        return {4: "_mm256", 8: "_mm512"}[self.w]

    def headers(self) -> tuple[str, ...]:
        return {"intrin": ("immintrin.h",), "ext": (), "extmem": ("string.h",)}[self.impl]

    def prelude(self) -> str:
        """Type definitions and load/store helpers (after the includes)."""
        if self.impl == "intrin":
            return ""
        t, size = self.t, 8 * self.w
        text = f"typedef double {t} __attribute__((vector_size({size})));\n"
        if self.impl == "ext":
            return text + f"typedef double {t}u __attribute__((vector_size({size}), aligned(8)));\n\n"
        return (f"{text}\nstatic inline {t} load{self.w}(const double *p)\n{{\n    {t} v;\n"
                "    memcpy(&v, p, sizeof v);\n    return v;\n}\n\n"
                f"static inline void store{self.w}(double *p, {t} v)\n{{\n    memcpy(p, &v, sizeof v);\n}}\n\n")

    def bcast(self, name: str, expr: str) -> str:
        """Declare ``name`` as ``expr`` broadcast (a scalar for vector extensions, which broadcast implicitly)."""
        if self.impl == "intrin":
            return f"const {self.t} {name} = {self._p}_set1_pd({expr});"
        return f"const double {name} = {expr};"

    def load(self, p: str) -> str:
        if self.impl == "intrin":
            return f"{self._p}_loadu_pd({p})"
        return f"*(const {self.t}u *)({p})" if self.impl == "ext" else f"load{self.w}({p})"

    def store(self, p: str, v: str) -> str:
        if self.impl == "intrin":
            return f"{self._p}_storeu_pd({p}, {v});"
        return f"*({self.t}u *)({p}) = {v};" if self.impl == "ext" else f"store{self.w}({p}, {v});"

    def zero(self) -> str:
        return f"{self._p}_setzero_pd()" if self.impl == "intrin" else f"({self.t}){{0}}"

    def fma(self, a: str, b: str, c: str) -> str:
        return f"{self._p}_fmadd_pd({a}, {b}, {c})" if self.impl == "intrin" else f"{c} + {a} * {b}"

    def accumulate(self, acc: str, a: str, b: str) -> str:
        return f"{acc} = {self.fma(a, b, acc)};" if self.impl == "intrin" else f"{acc} += {a} * {b};"


def _random_vec(rng: random.Random) -> Vec:
    w = min(rng.choice((4, 8, 8)), vector_doubles())  # the node's width: no AVX-512 code without AVX-512
    return Vec(w, rng.choice(("intrin", "ext", "extmem")))


def _vec_steps(vec: Vec, c: str, b: str, a: str, j: str, nvec: int) -> str:
    """The vector part of one C row update: ``nvec`` vectors per step, then single vectors, then a scalar tail."""
    w = vec.w

    def upd(o: int) -> str:
        p = f"{j} + {o}" if o else j
        return vec.store(f"{c} + {p}", vec.fma(a, vec.load(f"{b} + {p}"), vec.load(f"{c} + {p}")))

    text = f"int {j} = 0;\n"
    if nvec > 1:
        ups = "\n".join(upd(w * v) for v in range(nvec))
        text += f"for (; {j} + {w * nvec} <= n; {j} += {w * nvec}) {{\n{block(ups, 1)}\n}}\n"
    text += f"for (; {j} + {w} <= n; {j} += {w})\n    {upd(0)}\n"
    return text


def ikj_vec(rng: random.Random, s: Style) -> Draft:
    """i-k-j with the innermost loop written in vectors."""
    vec, nvec, omp = _random_vec(rng), rng.choice((1, 2, 2)), rng.random() < 0.35
    i, j, k, a = s.i, s.j, s.k, s.aval
    va = "va" if vec.impl == "intrin" else a
    kbody = (f"{s.cq}double {a} = {s.at('A', i, k)};\n" + (f"{vec.bcast(va, a)}\n" if vec.impl == "intrin" else "")
             + f"const double *{s.brow} = {s.row('B', k)};\n{_vec_steps(vec, s.crow, s.brow, va, j, nvec)}"
             f"for (; {j} < n; {j}++)\n    {s.crow}[{j}] += {a} * {s.brow}[{j}];")
    ibody = (f"double *{s.crow} = {s.row('C', i)};\nmemset({s.crow}, 0, (size_t)n * sizeof(double));\n"
             f"for (int {k} = 0; {k} < n; {k}++) {{\n{block(kbody, 1)}\n}}")
    body = f"{lead(omp_for(s, rng) if omp else '')}for (int {i} = 0; {i} < n; {i}++) {{\n{block(ibody, 1)}\n}}"
    code = f"{includes('string.h', *vec.headers())}{vec.prelude()}{s.signature}\n{{\n{block(body, 1)}\n}}"
    intended = {T.LOOP_REORDER, T.SIMD} | ({T.REGISTER_BLOCKING} if nvec > 1 else set())
    intended |= {T.OPENMP} if omp else set()
    desc = f"ikj-vec{vec.w}-{vec.impl}-x{nvec}{'-omp' if omp else ''}"
    header = f"C = A * B, i-k-j with the j loop in {vec.w}-double vectors"
    return Draft(desc, render(code, s, header), frozenset(intended))


def _tile_kloop(s: Style, vec: Vec, mr: int, nv: int, k_lo: str, k_hi: str) -> str:
    i, j, k = s.i, s.j, s.k
    bs = "\n".join(f"const {vec.t} b{v} = {vec.load(s.addr('B', k, coff(j, vec.w * v)))};" for v in range(nv))
    rows = []
    for r in range(mr):
        rows.append(vec.bcast(f"a{r}", s.at("A", roff(i, r), k)))
        rows += [vec.accumulate(f"c{r}{v}", f"a{r}", f"b{v}") for v in range(nv)]
    return f"for (int {k} = {k_lo}; {k} < {k_hi}; {k}++) {{\n{block(bs, 1)}\n{block(chr(10).join(rows), 1)}\n}}"


def _tile_named(s: Style, vec: Vec, mr: int, nv: int, kblock: bool) -> str:
    """One MR x NV-vector tile at (i, j) in named accumulators (``c00`` .. ``c52``), the k loop innermost: no loop
    over the tile, so the detector sees register blocking without loop reordering."""
    i, j = s.i, s.j
    accs = [f"c{r}{v}" for r in range(mr) for v in range(nv)]

    def cp(r: int, v: int) -> str:
        return s.addr("C", roff(i, r), coff(j, vec.w * v))

    init = [f"{a} = {vec.load(cp(r, v)) if kblock else vec.zero()}" for a, (r, v) in
            zip(accs, [(r, v) for r in range(mr) for v in range(nv)], strict=True)]
    k_lo, k_hi = (s.kk, "kend") if kblock else ("0", "n")
    stores = "\n".join(vec.store(cp(r, v), f"c{r}{v}") for r in range(mr) for v in range(nv))
    return f"{decls(vec.t, init)}\n{_tile_kloop(s, vec, mr, nv, k_lo, k_hi)}\n{stores}"


def _tile_loops(s: Style, vec: Vec, kblock: bool) -> str:
    """One MR x NV-vector tile at (i, j) in an accumulator array, written with loops over the MR and NV constants
    as the packed kernels' micro-tile is (gcc unrolls them fully and keeps ``acc`` in registers): the same lines
    for every tile shape. The k loop holds the tile's loops, so the detector also sees loop reordering."""
    i, j, k = s.i, s.j, s.k

    def at(m: str, r: str, v: str) -> str:
        return s.addr(m, r, f"{j} + VW * {v}")

    init = vec.load(at("C", f"({i} + r)", "v")) if kblock else vec.zero()
    k_lo, k_hi = (s.kk, "kend") if kblock else ("0", "n")
    a_decl = vec.bcast("ai", s.at("A", f"({i} + r)", k))
    kbody = (f"{vec.t} bv[NV];\nfor (int v = 0; v < NV; v++)\n    bv[v] = {vec.load(at('B', k, 'v'))};\n"
             f"for (int r = 0; r < MR; r++) {{\n    {a_decl}\n    for (int v = 0; v < NV; v++)\n"
             f"        {vec.accumulate('acc[r][v]', 'ai', 'bv[v]')}\n}}")
    return (f"{vec.t} acc[MR][NV];\nfor (int r = 0; r < MR; r++)\n    for (int v = 0; v < NV; v++)\n"
            f"        acc[r][v] = {init};\n"
            f"for (int {k} = {k_lo}; {k} < {k_hi}; {k}++) {{\n{block(kbody, 1)}\n}}\n"
            f"for (int r = 0; r < MR; r++)\n    for (int v = 0; v < NV; v++)\n"
            f"        {vec.store(at('C', f'({i} + r)', 'v'), 'acc[r][v]')}")


def tile_vec(rng: random.Random, s: Style, derived_nr: bool = False) -> Draft:
    """Register tile of vector accumulators over (a block of) k, unpacked operands: in named accumulators (register
    blocking + simd) or, half the time, in an accumulator array with loops over the tile (+ loop reordering). With
    ``derived_nr`` the array form writes its tile width ``NR (VW * NV)`` instead of its value (as ``packed``)."""
    vec = _random_vec(rng)
    mr, nv = rng.choice(((2, 2), (4, 2), (4, 1), (3, 2), (6, 1), (2, 3), (4, 3), (6, 2)))
    omp, kblock = rng.random() < 0.35, rng.random() < 0.35
    pragma = lead(omp_for(s, rng) if omp else "")
    kb, zero = (rng.choice((64, 128, 256)), zero_matrix(s, rng)) if kblock else (0, "")
    loops = rng.random() < 0.5  # drawn last: the named form of a seed is the kernel it was before this choice
    i, j, width, dot = s.i, s.j, vec.w * nv, s.dot
    mr_, nr_ = ("MR", "NR") if loops else (str(mr), str(width))
    tile = _tile_loops(s, vec, kblock) if loops else _tile_named(s, vec, mr, nv, kblock)
    jloop = f"for (int {j} = 0; {j} < nfull; {j} += {nr_}) {{\n{block(tile, 1)}\n}}"
    main = f"{pragma}for (int {i} = 0; {i} < mfull; {i} += {mr_}) {{\n{block(jloop, 1)}\n}}"
    if kblock:
        kb_ = "KB" if loops else str(kb)
        main = (f"{zero}\nfor (int {s.kk} = 0; {s.kk} < n; {s.kk} += {kb_}) {{\n"
                f"    const int kend = {s.mn(f'{s.kk} + {kb_}', 'n')};\n{block(main, 1)}\n}}")
    cij = f"{s.at('C', i, j)} = {dot}(n, {s.row('A', i)}, B, {j});"
    edges = (f"//# edges: leftover columns, then leftover rows\nfor (int {i} = 0; {i} < mfull; {i}++)\n"
             f"    for (int {j} = nfull; {j} < n; {j}++)\n        {cij}\n"
             f"for (int {i} = mfull; {i} < n; {i}++)\n    for (int {j} = 0; {j} < n; {j}++)\n        {cij}")
    regs = "MR * NV" if loops else str(mr * nv)
    body = (f"const int mfull = n - n % {mr_};\nconst int nfull = n - n % {nr_};\n"
            f"//# {mr_} x {nr_} tile of C in {regs} vector registers\n{main}\n{edges}")
    heads = includes("string.h" if "memset" in body else "stddef.h", *vec.headers())
    nr_value: int | str = "VW * NV" if derived_nr else width
    consts = s.consts_def({"VW": vec.w, "MR": mr, "NV": nv, "NR": nr_value, **({"KB": kb} if kblock else {})}) \
        if loops else ""
    code = (f"{heads}{consts}{vec.prelude()}{s.min_def() if kblock else ''}{dot_helper(s, dot)}"
            f"{s.signature}\n{{\n{block(body, 1)}\n}}")
    intended = {T.REGISTER_BLOCKING, T.SIMD} | ({T.OPENMP} if omp else set())
    intended |= ({T.CACHE_BLOCKING} if kblock else set()) | ({T.LOOP_REORDER} if loops else set())
    desc = (f"tile-vec{vec.w}-{vec.impl}-{mr}x{width}{'-loops' if loops else ''}{'-kb' if kblock else ''}"
            f"{'-omp' if omp else ''}")
    return Draft(desc, render(code, s, f"C = A * B with a {mr}x{width} vector register tile"), frozenset(intended))
