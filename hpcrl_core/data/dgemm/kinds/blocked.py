"""DGEMM variant kind with cache blocking (tiling) in plain C.

``blocked``: the i/j/k iteration space cut into tiles of 16..128 (one edge for all three, or one per
dimension), tile loops in several orders, tile bounds spelled four ways (precomputed end, min in the condition,
``&&`` conditions, block indices), and inside a tile either i-k-j (loop_reorder, ~3-30 GFLOPS at n = 256) or
i-j-k with a scalar accumulator read from C (cache_blocking alone, ~0.6-4 GFLOPS). Options: OpenMP on the outer
tile loop (only over i or j tiles, which own disjoint parts of C), ``omp simd`` and ``GCC unroll`` on the inner
loops, k unrolled by two.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hpcrl_core.bench.techniques import Technique
from hpcrl_core.data.dgemm.kinds.style import (
    Draft,
    Style,
    block,
    includes,
    layout_choice,
    lead,
    omp_for,
    render,
    unroll,
    zero_matrix,
)

T = Technique
TILES = (16, 24, 32, 48, 64, 96, 128)
_TILE_ORDERS = ("ikj", "ikj", "ijk", "ijk", "jik", "kij", "jki")


@dataclass(frozen=True)
class _Tiling:
    """Names and bounds of the tile loops. ``mode``: end | inline | and | index."""

    s: Style
    mode: str
    sizes: dict[str, str]  # dim -> constant name
    local: bool  # tile sizes as local const ints instead of file-scope constants

    def var(self, d: str) -> str:
        return getattr(self.s, d)

    def tile(self, d: str) -> str:
        return f"{self.var(d)}blk" if self.mode == "index" else getattr(self.s, d * 2)

    def end_name(self, d: str) -> str:
        return f"{self.var(d)}_end" if len(self.var(d)) > 1 else f"{self.var(d)}end"

    def header(self, d: str) -> str:
        """The tile loop over dimension d, plus the end declaration when precomputed."""
        t, size = self.tile(d), self.sizes[d]
        if self.mode == "index":
            return f"for (int {t} = 0; {t} < nb_{d}; {t}++) {{"
        head = f"for (int {t} = 0; {t} < n; {t} += {size}) {{"
        if self.mode == "end":
            head += f"\n    const int {self.end_name(d)} = {self.s.mn(f'{t} + {size}', 'n')};"
        return head

    def lo(self, d: str) -> str:
        return f"{self.tile(d)} * {self.sizes[d]}" if self.mode == "index" else self.tile(d)

    def cond(self, d: str, x: str) -> str:
        """The loop condition that keeps ``x`` inside the current tile of dimension d."""
        t, size = self.tile(d), self.sizes[d]
        if self.mode == "end":
            return f"{x} < {self.end_name(d)}"
        if self.mode == "and":
            return f"{x} < {t} + {size} && {x} < n"
        if self.mode == "index":
            return f"{x} < {self.s.mn(f'({t} + 1) * {size}', 'n')}"
        return f"{x} < {self.s.mn(f'{t} + {size}', 'n')}"

    def loop(self, d: str) -> str:
        v = self.var(d)
        return f"for (int {v} = {self.lo(d)}; {self.cond(d, v)}; {v}++)"


def _inner_ikj(tl: _Tiling, rng: random.Random, simd: bool, unr: bool, kx2: bool) -> str:
    s = tl.s
    i, j, k, a = s.i, s.j, s.k, s.aval
    jpragma = "#pragma omp simd" if simd else (unroll(rng) if unr and not kx2 else "")
    kpragma = unroll(rng) if unr and simd and not kx2 else ""
    if not kx2:
        kbody = (f"{s.cq}double {a} = {s.at('A', i, k)};\n{lead(jpragma)}{tl.loop('j')}\n"
                 f"    {s.at('C', i, j)} += {a} * {s.at('B', k, j)};")
        kloop = f"{lead(kpragma)}{tl.loop('k')} {{\n{block(kbody, 1)}\n}}"
        return f"{tl.loop('i')} {{\n{block(kloop, 1)}\n}}"
    pair = (f"{s.cq}double a0 = {s.at('A', i, k)}, a1 = {s.at('A', i, f'{k} + 1')};\n{lead(jpragma)}{tl.loop('j')}\n"
            f"    {s.at('C', i, j)} += a0 * {s.at('B', k, j)} + a1 * {s.at('B', f'({k} + 1)', j)};")
    single = (f"{s.cq}double {a} = {s.at('A', i, k)};\n{lead(jpragma)}{tl.loop('j')}\n"
              f"    {s.at('C', i, j)} += {a} * {s.at('B', k, j)};")
    row = (f"int {k} = {tl.lo('k')};\n//# two k steps per pass over the C row segment\n"
           f"for (; {tl.cond('k', f'{k} + 1')}; {k} += 2) {{\n{block(pair, 1)}\n}}\n"
           f"for (; {tl.cond('k', k)}; {k}++) {{\n{block(single, 1)}\n}}")
    return f"{tl.loop('i')} {{\n{block(row, 1)}\n}}"


def _inner_ijk(tl: _Tiling, rng: random.Random, simd: bool, unr: bool) -> str:
    s = tl.s
    i, j, k, acc = s.i, s.j, s.k, s.acc
    kpragma = f"#pragma omp simd reduction(+:{acc})" if simd else (unroll(rng) if unr else "")
    jpragma = unroll(rng) if unr and simd else ""
    body = (f"double {acc} = {s.at('C', i, j)};\n{lead(kpragma)}{tl.loop('k')}\n"
            f"    {acc} += {s.at('A', i, k)} * {s.at('B', k, j)};\n{s.at('C', i, j)} = {acc};")
    jloop = f"{lead(jpragma)}{tl.loop('j')} {{\n{block(body, 1)}\n}}"
    return f"{tl.loop('i')} {{\n{block(jloop, 1)}\n}}"


def _nest(tl: _Tiling, order: str, inner: str, omp: bool, rng: random.Random) -> str:
    text = inner
    for depth, d in reversed(list(enumerate(order))):
        pragma = lead(omp_for(tl.s, rng)) if omp and depth == 0 else ""
        text = f"{pragma}{tl.header(d)}\n{block(text, 1)}\n}}"
    return text


def _sizes(rng: random.Random, s: Style, local: bool) -> tuple[dict[str, str], dict[str, int]]:
    if rng.random() < 0.5:
        name = s.pick(rng, ("BS", "TILE", "BLK", "NB"))
        value = rng.choice(TILES)
        return {d: name for d in "ijk"}, {name: value}
    sets = (("bm", "bn", "bk"), ("tile_m", "tile_n", "tile_k"), ("mc", "nc", "kc")) if local else \
        (("BI", "BJ", "BK"), ("TI", "TJ", "TK"), ("MB", "NB", "KB"))
    names = s.pick(rng, sets)
    values = [rng.choice(TILES) for _ in range(3)]
    return dict(zip("ijk", names, strict=True)), dict(zip(names, values, strict=True))


def blocked(rng: random.Random, s: Style) -> Draft:
    """A tiled kernel; see the module docstring for the choices."""
    local = rng.random() < 0.2
    sizes, values = _sizes(rng, s, local)
    # Not local constants with block indices: the detector takes `blk * bs` for a pointer dereference (`* bs`) and
    # then does not know bs, so rule (3) of cache_blocking would miss the tiling.
    modes = ("end", "end", "inline", "and") if local else ("end", "end", "inline", "and", "index")
    tl = _Tiling(s, layout_choice(s, rng, modes), sizes, local)  # the house layout: tile ends in the header
    order = rng.choice(_TILE_ORDERS)
    # Half i-j-k: the only tiled kernels for prompts that permit cache_blocking but forbid loop_reorder. At 3:1 the
    # corpus held 34 of them in 212 tiled records, and the tiny model tiled i-k-j where loop_reorder was forbidden.
    inner_kind = rng.choice(("ikj", "ijk"))
    omp = order[0] != "k" and rng.random() < 0.35
    simd, unr = rng.random() < 0.3 and tl.mode != "and", rng.random() < 0.25  # omp simd needs a canonical loop
    kx2 = inner_kind == "ikj" and tl.mode != "and" and rng.random() < 0.3
    inner = _inner_ikj(tl, rng, simd, unr, kx2) if inner_kind == "ikj" else _inner_ijk(tl, rng, simd, unr)
    body = f"{zero_matrix(s, rng)}\n{_nest(tl, order, inner, omp, rng)}"
    if tl.mode == "index":
        counts = "".join(f"const int nb_{d} = (n + {sizes[d]} - 1) / {sizes[d]};\n" for d in "ijk")
        body = counts + body
    consts = ""
    if local:
        body = "".join(f"const int {k} = {v};\n" for k, v in values.items()) + body
    else:
        consts = s.consts_def(values)
    heads = ["string.h"] if "memset" in body else ["stddef.h"]
    code = f"{includes(*heads)}{consts}{s.min_def() if 'MIN' in body or s.min_name in body else ''}"
    code += f"{s.signature}\n{{\n{block(body, 1)}\n}}"
    intended = {T.CACHE_BLOCKING} | ({T.LOOP_REORDER} if inner_kind == "ikj" else set())
    intended |= ({T.OPENMP} if omp else set()) | ({T.SIMD} if simd else set())
    intended |= {T.REGISTER_BLOCKING} if unr or kx2 else set()
    tiles = "x".join(str(values[sizes[d]]) for d in "ijk")
    flags = "".join(f"-{f}" for f, on in (("omp", omp), ("simd", simd), ("unroll", unr), ("kx2", kx2)) if on)
    desc = f"blk{tiles}-{order}-{inner_kind}-{tl.mode}{flags}"
    header = f"C = A * B, {tiles} tiles in {order} order, {inner_kind} inside a tile"
    return Draft(desc, render(code, s, header), frozenset(intended))
