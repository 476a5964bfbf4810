"""DGEMM variant kind: packed, register-blocked micro-kernels (Goto/BLIS five loops), the fastest rung.

Derived from the structure of the shipped ``hpcrl_core/bench/kernels/packed.c`` and parameterised: vector width
4 (AVX2) or 8 (AVX-512) doubles, micro-tile MR x NR, blocking KC/MC/NC, GCC vector extensions or intrinsics or
plain scalar accumulators (no simd: left to the auto-vectoriser), k unrolled through 1, 2 or 4 rank-1 updates,
OpenMP (shared packed B, per-thread packed A, row blocks split across threads) or sequential, C either stored on
the first k slice or zeroed up front. Edge tiles go through a temporary tile. ~16-66 GFLOPS on one core at
n = 256.

Test: ``pytest tests/data/dgemm/test_variants.py``.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from hpcrl_core.bench.node import vector_doubles, vector_registers
from hpcrl_core.bench.techniques import Technique
from hpcrl_core.data.dgemm.kinds.style import Draft, Style, includes, render

T = Technique
_SHAPES = {8: ((6, 4), (6, 4), (8, 3), (8, 3), (4, 4), (12, 2), (14, 2), (8, 2), (6, 3), (4, 3)),
           4: ((6, 2), (4, 3), (8, 2), (6, 3), (4, 4), (12, 1))}
# With ``fit_registers`` only shapes whose tile fits the node's vector registers are drawn (``tile_registers``): on
# AVX2 (16 registers) 8x2, 6x3 and 4x4 spill and ran at 19-26 GFLOPS against 30-32 for 6x2 and 4x3 (medians over the
# 368 verified packed samples of nine evaluations, AMD Zen 3; docs/experiments.md).
# Scalar micro-tiles that gcc 12 keeps in (zmm) registers; 2x16, 3x8, 8x8 and 4x16 measured 1-5 GFLOPS.
_SCALAR_MR = (4, 6)


@dataclass(frozen=True)
class _Cfg:
    w: int  # doubles per vector (the scalar kind uses it only to size NR)
    kind: str  # ext | intrin | scalar
    mr: int
    nv: int
    kc: int
    mc: int
    nc: int
    unroll: int
    omp: bool
    zero_first: bool
    alloc: str  # posix | aligned

    @property
    def nr(self) -> int:
        return self.w * self.nv


def tile_registers(mr: int, nv: int) -> int:
    """Vector registers the micro-kernel's rank-1 update holds live: MR x NV accumulators, the NV vectors of the
    B panel's row and one broadcast element of A."""
    return mr * nv + nv + 1


def _random_cfg(rng: random.Random, fit_registers: bool) -> _Cfg:
    kind = rng.choice(("ext", "ext", "ext", "intrin", "intrin", "scalar"))
    if kind == "scalar":  # NR = 8 scalars, no k unrolling (the scalar micro-kernel has its own k loop)
        w, mr, nv, unroll = 8, rng.choice(_SCALAR_MR), 1, 1
    else:
        w = min(rng.choice((8, 8, 8, 4)), vector_doubles())  # the node's width: no AVX-512 code without AVX-512
        shapes = _SHAPES[w]
        if fit_registers:
            room = vector_registers(w)
            shapes = tuple(sh for sh in shapes if tile_registers(*sh) <= room)
        mr, nv = rng.choice(shapes)
        unroll = rng.choice((1, 2, 2, 4))
    return _Cfg(w, kind, mr, nv, rng.choice((128, 192, 256, 256, 320, 384)), rng.choice((64, 96, 120, 128, 192, 256)),
                rng.choice((1024, 2048, 3072, 4096)), unroll, rng.random() < 0.5, rng.random() < 0.3,
                rng.choice(("posix", "aligned")))


def _vector_ops(c: _Cfg) -> tuple[str, dict[str, str]]:
    """Type definitions / helpers and the spellings of the micro-kernel's vector operations."""
    if c.kind == "intrin":
        p, t = ("_mm512", "__m512d") if c.w == 8 else ("_mm256", "__m256d")
        return "", {"t": t, "load": f"{p}_load_pd", "loadu": f"{p}_loadu_pd", "storeu": f"{p}_storeu_pd",
                    "zero": f"{p}_setzero_pd()", "bcast": f"{p}_set1_pd", "fma": f"{p}_fmadd_pd", "add": f"{p}_add_pd"}
    t = f"v{c.w}d"
    defs = (f"typedef double {t} __attribute__((vector_size(VW * sizeof(double))));\n\n"
            "//# Unaligned access to C (memcpy compiles to one vector move).\n"
            f"static inline {t} loadu(const double *p) {{ {t} v; memcpy(&v, p, sizeof v); return v; }}\n"
            f"static inline void storeu(double *p, {t} v) {{ memcpy(p, &v, sizeof v); }}\n\n")
    return defs, {"t": t, "zero": f"({t}){{0}}"}


def _rank1(c: _Cfg, ops: dict[str, str]) -> str:
    t = ops["t"]
    if c.kind == "intrin":
        load, bcast = f"{ops['load']}(b + VW * v)", f"{ops['bcast']}(a[i])"
        update = f"acc[i][v] = {ops['fma']}(ai, bv[v], acc[i][v]);"
        ai = f"const {t} ai = {bcast};"
    else:
        load, update, ai = f"*(const {t} *)(b + VW * v)", "acc[i][v] += ai * bv[v];", "const double ai = a[i];"
    return ("//# One rank-1 update of the register tile: acc += a[0..MR) x b[0..NR).\n"
            f"static inline __attribute__((always_inline)) void rank1({t} acc[MR][NV], const double *restrict a,\n"
            f"                                                    const double *restrict b)\n{{\n    {t} bv[NV];\n"
            f"    for (int v = 0; v < NV; v++)\n        bv[v] = {load};\n    for (int i = 0; i < MR; i++) {{\n"
            f"        {ai}\n        for (int v = 0; v < NV; v++)\n            {update}\n    }}\n}}\n\n")


def _k_loop(c: _Cfg) -> str:
    if c.unroll == 1:
        return "    for (int k = 0; k < kc; k++, a += MR, b += NR)\n        rank1(acc, a, b);\n"
    calls = "\n".join(f"        rank1(acc, a + {u} * MR, b + {u} * NR);" if u else "        rank1(acc, a, b);"
                      for u in range(c.unroll))
    return (f"    int k = 0;\n    for (; k + {c.unroll - 1} < kc; k += {c.unroll}) {{\n{calls}\n"
            f"        a += {c.unroll} * MR;\n        b += {c.unroll} * NR;\n    }}\n"
            "    for (; k < kc; k++, a += MR, b += NR)\n        rank1(acc, a, b);\n")


def _micro_kernel(c: _Cfg, ops: dict[str, str]) -> str:
    head = ("static inline __attribute__((always_inline)) void micro_kernel(int kc, const double *restrict a,\n"
            "        const double *restrict b, double *restrict c, int ldc, int first)\n{\n")
    if c.kind == "scalar":
        return (f"//# MR x NR tile of C = (MR x kc packed panel of A) x (kc x NR packed panel of B).\n{head}"
                "    double acc[MR][NR] = {{0}};\n    for (int k = 0; k < kc; k++, a += MR, b += NR)\n"
                "        for (int i = 0; i < MR; i++)\n            for (int j = 0; j < NR; j++)\n"
                "                acc[i][j] += a[i] * b[j];\n    for (int i = 0; i < MR; i++)\n"
                "        for (int j = 0; j < NR; j++) {\n            double *p = c + (size_t)i * ldc + j;\n"
                "            *p = first ? acc[i][j] : *p + acc[i][j];\n        }\n}\n\n")
    if c.kind == "intrin":
        out = f"{ops['storeu']}(p, first ? acc[i][v] : {ops['add']}({ops['loadu']}(p), acc[i][v]));"
    else:
        out = "storeu(p, first ? acc[i][v] : loadu(p) + acc[i][v]);"
    return (f"//# Invariant: after step k, acc[i][v] = sum over p < k of a[p*MR+i] * b[p*NR + VW*v ..].\n{head}"
            f"    {ops['t']} acc[MR][NV];\n    for (int i = 0; i < MR; i++)\n        for (int v = 0; v < NV; v++)\n"
            f"            acc[i][v] = {ops['zero']};\n{_k_loop(c)}    for (int i = 0; i < MR; i++)\n"
            "        for (int v = 0; v < NV; v++) {\n            double *p = c + (size_t)i * ldc + VW * v;\n"
            f"            {out}\n        }}\n}}\n\n")


_PACKING = """/* Pack an mc x kc block of A into MR-tall column panels, zero-padding the last panel. */
static void pack_a(int n, int mc, int kc, const double *A, double *Ap)
{
    for (int ir = 0; ir < mc; ir += MR, Ap += (size_t)MR * kc)
        for (int i = 0; i < MR; i++)
            for (int k = 0; k < kc; k++)
                Ap[k * MR + i] = ir + i < mc ? A[(size_t)(ir + i) * n + k] : 0.0;
}

//# Pack a kc x nr slice of B into one NR-wide row panel, zero-padding columns.
static void pack_b(int n, int nr, int kc, const double *B, double *Bp)
{
    for (int k = 0; k < kc; k++, Bp += NR) {
        const double *src = B + (size_t)k * n;
        for (int j = 0; j < NR; j++)
            Bp[j] = j < nr ? src[j] : 0.0;
    }
}

//# C block (mc x nc) op= packed A block x packed B panel; edge tiles go through tmp.
static void macro_kernel(int n, int mc, int nc, int kc, const double *Ap, const double *Bp, double *C, int first)
{
    double tmp[MR * NR] __attribute__((aligned(64)));
    for (int jr = 0; jr < nc; jr += NR) {
        const int nr = MINF(NR, nc - jr);
        for (int ir = 0; ir < mc; ir += MR) {
            const int mr = MINF(MR, mc - ir);
            const double *a = Ap + (size_t)ir * kc, *b = Bp + (size_t)jr * kc;
            double *c = C + (size_t)ir * n + jr;
            if (mr == MR && nr == NR) {
                micro_kernel(kc, a, b, c, n, first);
            } else {
                micro_kernel(kc, a, b, tmp, NR, 1);
                for (int i = 0; i < mr; i++)
                    for (int j = 0; j < nr; j++) {
                        double *p = c + (size_t)i * n + j;
                        *p = first ? tmp[i * NR + j] : *p + tmp[i * NR + j];
                    }
            }
        }
    }
}

//# Fallback when the packing buffers cannot be allocated: unpacked i-k-j.
static void dgemm_simple(int n, const double *A, const double *B, double *C)
{
    memset(C, 0, (size_t)n * n * sizeof(double));
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++)
                C[(size_t)i * n + j] += A[(size_t)i * n + k] * B[(size_t)k * n + j];
}

"""

def _buffers(c: _Cfg, a_len: str) -> str:
    """Allocate the packing buffers Bp (shared) and Ap (``a_len`` doubles), 64-byte aligned."""
    if c.alloc == "posix":
        return ("void *bp_raw = NULL, *ap_raw = NULL;\n"
                "if (posix_memalign(&bp_raw, 64, b_len * sizeof(double)) != 0) bp_raw = NULL;\n"
                f"if (posix_memalign(&ap_raw, 64, {a_len} * sizeof(double)) != 0) ap_raw = NULL;\n"
                "double *Bp = bp_raw, *Ap = ap_raw;\n")
    return ("double *Bp = aligned_alloc(64, (b_len * sizeof(double) + 63) / 64 * 64);\n"
            f"double *Ap = aligned_alloc(64, ({a_len} * sizeof(double) + 63) / 64 * 64);\n")


_FALLBACK = "if (!Bp || !Ap) {\n    free(Bp);\n    free(Ap);\n    dgemm_simple(n, A, B, C);\n    return;\n}\n"


def _driver_seq(c: _Cfg, s: Style) -> str:
    first = "0" if c.zero_first else "pc == 0"
    zero = "memset(C, 0, (size_t)n * n * sizeof(double));\n" if c.zero_first else ""
    return (f"{s.signature}\n{{\n    const int kcmax = MINF(KC, n);\n"
            "    const size_t b_len = (size_t)kcmax * round_up(MINF(NC, n), NR);\n"
            "    const size_t a_len = (size_t)round_up(MINF(MC, n), MR) * kcmax;\n"
            + _indent(_buffers(c, "a_len") + _FALLBACK + zero) +
            "    for (int jc = 0; jc < n; jc += NC) {\n        const int nc = MINF(NC, n - jc);\n"
            "        for (int pc = 0; pc < n; pc += KC) {\n            const int kc = MINF(KC, n - pc);\n"
            "            //# pack the kc x nc panel of B once; every row block of A reuses it\n"
            "            for (int jr = 0; jr < nc; jr += NR)\n"
            "                pack_b(n, MINF(NR, nc - jr), kc, B + (size_t)pc * n + jc + jr, Bp + (size_t)jr * kc);\n"
            "            for (int ic = 0; ic < n; ic += MC) {\n                const int mc = MINF(MC, n - ic);\n"
            "                pack_a(n, mc, kc, A + (size_t)ic * n + pc, Ap);\n"
            f"                macro_kernel(n, mc, nc, kc, Ap, Bp, C + (size_t)ic * n + jc, {first});\n"
            "            }\n        }\n    }\n    free(Bp);\n    free(Ap);\n}\n")


def _driver_omp(c: _Cfg, s: Style) -> str:
    first = "0" if c.zero_first else "pc == 0"
    zero = "memset(C, 0, (size_t)n * n * sizeof(double));\n" if c.zero_first else ""
    return (f"{s.signature}\n{{\n    //# row blocks: at most MC rows each, as many as a multiple of the threads\n"
            "    const int nt = omp_get_max_threads();\n    const int nblk0 = round_up((n + MC - 1) / MC, nt);\n"
            "    const int mc_blk = round_up((n + nblk0 - 1) / nblk0, MR);\n"
            "    const int nblk = (n + mc_blk - 1) / mc_blk;\n    const int kcmax = MINF(KC, n);\n"
            "    const size_t b_len = (size_t)kcmax * round_up(MINF(NC, n), NR);\n"
            "    const size_t a_len = (size_t)round_up(mc_blk * kcmax, 8);\n"
            + _indent(_buffers(c, "(size_t)nt * a_len") + _FALLBACK + zero) +
            "    #pragma omp parallel num_threads(nt)\n    {\n"
            "        double *my_ap = Ap + (size_t)omp_get_thread_num() * a_len;\n"
            "        for (int jc = 0; jc < n; jc += NC) {\n            const int nc = MINF(NC, n - jc);\n"
            "            for (int pc = 0; pc < n; pc += KC) {\n                const int kc = MINF(KC, n - pc);\n"
            "                //# B is packed together; the barrier at the loop's end publishes it\n"
            "                #pragma omp for schedule(static)\n                for (int jr = 0; jr < nc; jr += NR)\n"
            "                    pack_b(n, MINF(NR, nc - jr), kc, B + (size_t)pc * n + jc + jr,\n"
            "                           Bp + (size_t)jr * kc);\n"
            "                #pragma omp for schedule(static)\n                for (int ib = 0; ib < nblk; ib++) {\n"
            "                    const int ic = ib * mc_blk;\n"
            "                    const int mc = MINF(mc_blk, n - ic);\n"
            "                    pack_a(n, mc, kc, A + (size_t)ic * n + pc, my_ap);\n"
            f"                    macro_kernel(n, mc, nc, kc, my_ap, Bp, C + (size_t)ic * n + jc, {first});\n"
            "                }\n            }\n        }\n    }\n    free(Bp);\n    free(Ap);\n}\n")


def _indent(text: str) -> str:
    return "".join(f"    {ln}\n" for ln in text.splitlines())


_RENAMES: tuple[dict[str, str], ...] = (
    {},
    {"pack_a": "packA", "pack_b": "packB", "macro_kernel": "macroKernel", "micro_kernel": "microKernel",
     "rank1": "rank1_update", "dgemm_simple": "dgemm_fallback"},
    {"pack_a": "pack_lhs", "pack_b": "pack_rhs", "macro_kernel": "block_kernel", "micro_kernel": "tile_kernel",
     "rank1": "outer_product", "dgemm_simple": "gemm_unpacked"},
)


def packed(rng: random.Random, s: Style, fit_registers: bool = False, derived_nr: bool = False) -> Draft:
    """A Goto/BLIS-style packed kernel; see the module docstring for the choices. With ``fit_registers`` the vector
    micro-tile is drawn among the shapes that fit the node's vector registers (``tile_registers``). With
    ``derived_nr`` the tile's width is written ``NR (VW * NV)`` instead of its value, so a kernel whose VW or NV is
    changed stays consistent (the micro-kernel stores NV vectors of VW doubles; the drivers step by NR)."""
    c = _random_cfg(rng, fit_registers)
    defs, ops = _vector_ops(c) if c.kind != "scalar" else ("", {})
    consts: dict[str, int | str] = {"VW": c.w, "NV": c.nv, "MR": c.mr, "NR": "VW * NV" if derived_nr else c.nr,
                                    "KC": c.kc, "MC": c.mc, "NC": c.nc}
    heads = ["stdlib.h", "string.h"] + (["omp.h"] if c.omp else []) + (["immintrin.h"] if c.kind == "intrin" else [])
    guard = "#ifndef _POSIX_C_SOURCE\n#define _POSIX_C_SOURCE 200112L\n#endif\n" if c.alloc == "posix" else ""
    code = (f"{guard}{includes(*heads)}{s.consts_def(consts)}{defs}{s.min_def()}"
            "static inline int round_up(int x, int m) { return (x + m - 1) / m * m; }\n\n"
            f"{_rank1(c, ops) if c.kind != 'scalar' else ''}{_micro_kernel(c, ops)}{_PACKING}"
            f"{_driver_omp(c, s) if c.omp else _driver_seq(c, s)}")
    code = re.sub(r"MINF\(([^,()]+), ([^()]+)\)", lambda m: s.mn(m.group(1), m.group(2)), code)
    names = s.pick(rng, _RENAMES)
    if names:
        code = re.sub(r"\b(" + "|".join(names) + r")\b", lambda m: names[m.group(1)], code)
    intended = {T.LOOP_REORDER, T.CACHE_BLOCKING, T.REGISTER_BLOCKING} | ({T.OPENMP} if c.omp else set())
    intended |= {T.SIMD} if c.kind != "scalar" else set()
    desc = (f"packed-{c.kind}{c.w if c.kind != 'scalar' else ''}-{c.mr}x{c.nr}-kc{c.kc}-mc{c.mc}-u{c.unroll}"
            f"{'-omp' if c.omp else ''}{'-z' if c.zero_first else ''}")
    header = f"packed DGEMM: {c.mr}x{c.nr} register tile, KC={c.kc} MC={c.mc} NC={c.nc}"
    return Draft(desc, render(code, s, header), frozenset(intended))
